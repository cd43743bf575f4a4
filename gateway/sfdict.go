package gateway

import (
	"errors"
	"strconv"
	"strings"
)

// sfDictionary parses a Structured Field Dictionary (RFC 8941 §4.2.2)
// from the field lines values, combined as §4.2 says, and returns each
// member's value as sfItem (the last member of a repeated key wins, as
// §4.2.2 says). Parameters are checked, then dropped: the preference
// fields of RFC 9530 §4 give them no meaning. Anything that is not a
// Dictionary is an error; the caller then treats the field as absent.
func sfDictionary(values []string) (map[string]sfItem, error) {
	p := &sfParser{s: strings.Join(values, ",")}
	p.skipSP()
	out := map[string]sfItem{}
	for !p.done() {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		item := sfItem{kind: sfBoolean, boolean: true} // a key alone is ?1
		if p.peek() == '=' {
			p.i++
			if item, err = p.member(); err != nil {
				return nil, err
			}
		} else if err := p.params(); err != nil {
			return nil, err
		}
		out[key] = item
		p.skipOWS()
		if p.done() {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, errSF
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, errSF // a trailing comma
		}
	}
	return out, nil
}

var errSF = errors.New("gateway: not a structured field dictionary")

// sfItem is a member's value; only integers are kept as values, the
// other kinds are told apart by kind.
type sfItem struct {
	kind    sfKind
	integer int64
	boolean bool
}

type sfKind int

const (
	sfInteger sfKind = iota
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfInnerList
)

type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipSP() {
	for p.peek() == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for c := p.peek(); c == ' ' || c == '\t'; c = p.peek() {
		p.i++
	}
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || c >= 'A' && c <= 'Z' }

// key is §4.2.3.3: lcalpha or "*", then lcalpha, digits, "_-.*".
func (p *sfParser) key() (string, error) {
	start := p.i
	if c := p.peek(); !isLCAlpha(c) && c != '*' {
		return "", errSF
	}
	for c := p.peek(); isLCAlpha(c) || isDigit(c) || c != 0 && strings.IndexByte("_-.*", c) >= 0; c = p.peek() {
		p.i++
	}
	return p.s[start:p.i], nil
}

// member is an Item or an Inner List with its parameters (§4.2.1.1).
func (p *sfParser) member() (sfItem, error) {
	if p.peek() != '(' {
		item, err := p.bareItem()
		if err == nil {
			err = p.params()
		}
		return item, err
	}
	// §4.2.1.2: "(" *SP [ item *( 1*SP item ) *SP ] ")" parameters.
	p.i++
	for {
		p.skipSP()
		if p.peek() == ')' {
			p.i++
			return sfItem{kind: sfInnerList}, p.params()
		}
		if _, err := p.bareItem(); err != nil {
			return sfItem{}, err
		}
		if err := p.params(); err != nil {
			return sfItem{}, err
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return sfItem{}, errSF
		}
	}
}

// params is §4.2.3.2: *( ";" *SP key [ "=" bare-item ] ).
func (p *sfParser) params() error {
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		if _, err := p.key(); err != nil {
			return err
		}
		if p.peek() == '=' {
			p.i++
			if _, err := p.bareItem(); err != nil {
				return err
			}
		}
	}
	return nil
}

// bareItem is §4.2.3.1.
func (p *sfParser) bareItem() (sfItem, error) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case isAlpha(c) || c == '*':
		return p.token()
	}
	return sfItem{}, errSF
}

// number is §4.2.4: at most 15 integer digits, or 12 and up to 3
// fractional ones.
func (p *sfParser) number() (sfItem, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	if !isDigit(p.peek()) {
		return sfItem{}, errSF
	}
	digits, point := 0, -1
	for ; !p.done(); p.i++ {
		c := p.s[p.i]
		if isDigit(c) {
			digits++
		} else if c == '.' && point < 0 {
			if digits > 12 {
				return sfItem{}, errSF
			}
			point = digits
		} else {
			break
		}
		if digits > 15 {
			return sfItem{}, errSF
		}
	}
	text := p.s[start:p.i]
	if point >= 0 {
		if frac := digits - point; frac < 1 || frac > 3 {
			return sfItem{}, errSF
		}
		return sfItem{kind: sfDecimal}, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return sfItem{}, errSF
	}
	return sfItem{kind: sfInteger, integer: n}, nil
}

// str is §4.2.5: printable ASCII, with \" and \\ the only escapes.
func (p *sfParser) str() (sfItem, error) {
	p.i++ // the opening quote
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if n := p.peek(); n != '"' && n != '\\' {
				return sfItem{}, errSF
			}
			p.i++
		case c == '"':
			return sfItem{kind: sfString}, nil
		case c < 0x20 || c > 0x7e:
			return sfItem{}, errSF
		}
	}
	return sfItem{}, errSF
}

// token is §4.2.6: ALPHA or "*", then tchar, ":" and "/".
func (p *sfParser) token() (sfItem, error) {
	p.i++
	for !p.done() && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return sfItem{kind: sfToken}, nil
}

func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// bytes is §4.2.7: ":" base64 (RFC 4648 alphabet, "=" padding) ":".
func (p *sfParser) bytes() (sfItem, error) {
	p.i++
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == ':':
			return sfItem{kind: sfBytes}, nil
		case isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=':
		default:
			return sfItem{}, errSF
		}
	}
	return sfItem{}, errSF
}

// boolean is §4.2.8: ?0 or ?1.
func (p *sfParser) boolean() (sfItem, error) {
	p.i++
	switch p.peek() {
	case '0', '1':
		v := p.peek() == '1'
		p.i++
		return sfItem{kind: sfBoolean, boolean: v}, nil
	}
	return sfItem{}, errSF
}
