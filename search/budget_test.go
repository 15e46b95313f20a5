package search

import (
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int
	}{
		{"empty text costs nothing", "", 0},
		{"one byte costs one token", "a", 1},
		{"four bytes cost one token", "abcd", 1},
		{"five bytes cost two tokens", "abcde", 2},
		{"bytes are counted, not characters", "日本", 2}, // 6 bytes
		{"a kilobyte costs 256 tokens", strings.Repeat("x", 1024), 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokens(tt.text); got != tt.want {
				t.Errorf("Tokens(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

func TestCut(t *testing.T) {
	tenTokens := []int{40, 40, 40} // each exactly 10 tokens
	tests := []struct {
		name   string
		sizes  []int
		budget int
		want   int
	}{
		{"items that fill the budget exactly all fit", tenTokens, 30, 3},
		{"one token short of the last item cuts it", tenTokens, 29, 2},
		{"two items fit in exactly their tokens", tenTokens, 20, 2},
		{"a third item would pass the budget by one token", []int{40, 40, 1}, 20, 2},
		{"an item one byte over a token boundary costs one more", []int{40, 41}, 20, 1},
		{"a first item that does not fit leaves nothing", tenTokens, 9, 0},
		{"a smaller item after one that does not fit is not taken", []int{40, 80, 4}, 20, 1},
		{"no budget keeps everything", tenTokens, 0, 3},
		{"a negative budget keeps everything", tenTokens, -1, 3},
		{"empty items cost nothing", []int{0, 0, 40}, 10, 3},
		{"no items fit in any budget", nil, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cut(tt.sizes, tt.budget); got != tt.want {
				t.Errorf("Cut(%v, %d) = %d, want %d", tt.sizes, tt.budget, got, tt.want)
			}
		})
	}
}
