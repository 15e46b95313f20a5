// Names every failing or warning check of a conformance run that no entry
// of the baseline covers, with its message and details.
//
// Usage: node unexpected.cjs RESULTS_DIR BASELINE.yml

const fs = require('node:fs');
const path = require('node:path');

const [dir, baseline] = process.argv.slice(2);
const listed = fs.readFileSync(baseline, 'utf8').split('\n')
  .map((l) => l.replace(/#.*/, '').trim())
  .filter((l) => l.startsWith('- '))
  .map((l) => l.slice(2).trim());

for (const d of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const scenario = d.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
  if (listed.includes(scenario)) continue;
  let checks;
  try {
    checks = JSON.parse(fs.readFileSync(path.join(dir, d, 'checks.json'), 'utf8'));
  } catch {
    continue;
  }
  for (const c of checks) {
    if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
    if (listed.includes(`${scenario}:${c.id}`)) continue;
    console.log(`  ${scenario}:${c.id} ${c.status}: ${c.errorMessage ?? ''}`);
    if (c.details) console.log(`    details: ${JSON.stringify(c.details).slice(0, 600)}`);
  }
}
