package httpbreaker

import (
	"net/http"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// HostKey is the default Options.Key: the server a request goes to, in
// one canonical form, so that every spelling of one server shares one
// breaker and the key is fit to name it. It is the URL's host and port
// with
//   - the host's ASCII letters in lower case and its trailing dots
//     dropped (http://Example.COM./ and http://example.com/ are one
//     server); other characters are kept as they are, since Unicode's
//     lower case is not the mapping by which a client finds the server
//     (IDNA): http://İ.example/ goes to xn--i-9bb.example, not to
//     i.example, and http://ẞ.example/ to ss.example, not to ß.example.
//     So a host spelled in two non-ASCII cases (Ä and ä) may get two
//     breakers, but two servers never share one;
//   - an IPv6 address in its canonical form, in brackets ([::1], and
//     [fe80::1%25eth0] with its zone escaped as in a URL);
//   - the port without leading zeros, and left out when it is empty or
//     the scheme's default, 80 for http and 443 for https;
//   - every byte that is not part of a printable UTF-8 character, and
//     every '%', escaped as %XX (http://%ff.example/ is "%FF.example"), so
//     that the key, and the breaker's name made from it, is valid UTF-8
//     whatever the URL holds, and two different hosts never share a key.
//
// The scheme is not part of the key: http and https to one host and port
// share a breaker. A request with no URL has the key "". HostKey allocates
// nothing when the URL's host is in canonical form already, and is safe
// for concurrent use. Compose it in a custom Key to split a host further,
// as in HostKey(r) + r.URL.Path.
func HostKey(r *http.Request) string {
	u := r.URL
	if u == nil {
		return ""
	}
	if isCanonical(u.Scheme, u.Host) {
		return u.Host
	}
	var buf [128]byte
	k := appendHostKey(buf[:0], u.Scheme, u.Hostname(), u.Port(), strings.HasPrefix(u.Host, "["))
	if string(k) == u.Host {
		return u.Host
	}
	return string(k)
}

// isCanonical reports, in one pass, whether hostport is a key already as
// appendHostKey would write it, in the common form: a name or an IPv4
// address of lower-case letters, digits, '-', '_' and '.', not ending in
// a dot, and an optional port that is not the scheme's default, with no
// leading zero. Anything else takes the full path.
func isCanonical(scheme, hostport string) bool {
	colon := len(hostport)
	for i := 0; i < len(hostport); i++ {
		c := hostport[i]
		if c == ':' && colon == len(hostport) {
			colon = i
		} else if !('0' <= c && c <= '9' || i < colon && ('a' <= c && c <= 'z' || c == '-' || c == '_' || c == '.')) {
			return false // the port is digits only
		}
	}
	host, port := hostport[:colon], hostport[min(colon+1, len(hostport)):]
	if host == "" || host[len(host)-1] == '.' {
		return false
	}
	if colon == len(hostport) {
		return true
	}
	return port != "" && port[0] != '0' && !defaultPort(scheme, port)
}

// appendHostKey appends the key of host and port, as url.URL's Hostname
// and Port split them, under scheme; bracketed tells whether the URL
// wrote the host in brackets.
func appendHostKey(dst []byte, scheme, host, port string, bracketed bool) []byte {
	if h := strings.TrimRight(host, "."); h != "" {
		host = h
	}
	if ip, ok := parseIP(host); ok {
		bracketed = ip.Is6()
		if bracketed {
			dst = append(dst, '[')
		}
		dst = ip.WithZone("").AppendTo(dst)
		if zone := ip.Zone(); zone != "" {
			dst = appendEscaped(append(dst, "%25"...), zone, false)
		}
	} else {
		if bracketed {
			dst = append(dst, '[')
		}
		dst = appendEscaped(dst, host, true)
	}
	if bracketed {
		dst = append(dst, ']')
	}
	if port != "" {
		// Leading zeros name the same port to the dialer; keep one digit.
		port = port[min(len(port)-1, len(port)-len(strings.TrimLeft(port, "0"))):]
	}
	if port == "" || defaultPort(scheme, port) {
		return dst
	}
	return append(append(dst, ':'), port...)
}

// parseIP parses host if it is an IPv6 address. An IPv4 address needs no
// parsing: netip takes only the canonical form, which is already its key;
// and netip.ParseAddr allocates its error.
func parseIP(host string) (netip.Addr, bool) {
	if !strings.Contains(host, ":") {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	return ip, err == nil
}

// appendEscaped appends s with every byte that is not part of a printable
// UTF-8 character, and every '%', escaped as %XX, with its ASCII letters
// in lower case if lower.
func appendEscaped(dst []byte, s string, lower bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); {
		// ASCII, nearly every host, without decoding or Unicode tables.
		if c := s[i]; c < utf8.RuneSelf {
			if c < ' ' || c == '%' || c == 0x7f {
				dst = append(dst, '%', hex[c>>4], hex[c&0xf])
			} else if lower && 'A' <= c && c <= 'Z' {
				dst = append(dst, c+'a'-'A')
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsPrint(r) || r == utf8.RuneError && n == 1 {
			for _, c := range []byte(s[i : i+n]) {
				dst = append(dst, '%', hex[c>>4], hex[c&0xf])
			}
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// defaultPort reports whether port, without leading zeros, is scheme's
// default (80 for http, 443 for https), which the key leaves out.
func defaultPort(scheme, port string) bool {
	return port == "80" && strings.EqualFold(scheme, "http") || port == "443" && strings.EqualFold(scheme, "https")
}
