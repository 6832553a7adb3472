package ptxsim

import (
	"fmt"
	"strings"
)

// tokKind classifies a token of PTX text.
type tokKind uint8

const (
	tIdent  tokKind = iota // names, opcodes, directives, registers: .entry, %r1, $L_for_1, ld.global.v4.f32
	tNum                   // 12, 0x1f, 0f3F800000, 0d3FF0000000000000, 1.5
	tPunct                 // one of , ; { } [ ] ( ) < > + - | ! @ : =
	tString                // "nounroll"
)

type token struct {
	kind tokKind
	s    string
	line int
}

func (t token) String() string { return t.s }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || c == '%' || c == '.'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9'
}

// lex splits PTX text into tokens (PTX ISA §4: comments are C-style, a
// "::" inside a name such as .shared::cta is part of it).
func lex(src string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' && src[j] != '\n' {
				j++
			}
			if j >= len(src) || src[j] != '"' {
				return nil, fmt.Errorf("line %d: unterminated string", line)
			}
			toks = append(toks, token{tString, src[i+1 : j], line})
			i = j + 1
		case c >= '0' && c <= '9':
			j := i + 1
			hex := j < len(src) && (src[j] == 'x' || src[j] == 'X' || src[j] == 'f' || src[j] == 'F' || src[j] == 'd' || src[j] == 'D') && c == '0'
			for j < len(src) {
				d := src[j]
				if d >= '0' && d <= '9' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d == '.' {
					j++
					continue
				}
				// a signed exponent of a decimal float: 1e-5
				if (d == '-' || d == '+') && !hex && (src[j-1] == 'e' || src[j-1] == 'E') {
					j++
					continue
				}
				break
			}
			toks = append(toks, token{tNum, src[i:j], line})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(src) {
				if isIdentChar(src[j]) {
					j++
					continue
				}
				if src[j] == ':' && j+1 < len(src) && src[j+1] == ':' {
					j += 2
					continue
				}
				break
			}
			toks = append(toks, token{tIdent, src[i:j], line})
			i = j
		case strings.IndexByte(",;{}[]()<>+-|!@:=", c) >= 0:
			toks = append(toks, token{tPunct, string(c), line})
			i++
		default:
			return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
		}
	}
	return toks, nil
}
