package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
)

// h1Answer is an HTTP/1.1 answer as a Result needs it.
type h1Answer struct {
	status int
	header http.Header // an error answer's only (Result)
	body   []byte      // up to MaxSuccessBody or MaxErrorBody
	reuse  bool        // read to its end, and the server keeps the connection
}

var errBadAnswer = errors.New("malformed HTTP/1.1 answer")

// readH1Answer reads one answer from br: the status line, the headers,
// and a body framed by Content-Length, chunked, or the connection's end.
// Interim (1xx) answers are skipped.
func readH1Answer(br *bufio.Reader) (h1Answer, error) {
	for {
		a, framing, length, err := readH1Head(br)
		if err != nil {
			return a, err
		}
		if a.status >= 100 && a.status < 200 {
			continue
		}
		limit := int64(MaxErrorBody)
		if a.status >= 200 && a.status < 300 {
			limit = MaxSuccessBody
		}
		var body io.Reader
		switch {
		case a.status == http.StatusNoContent || a.status == http.StatusNotModified:
			return a, nil
		case framing == "chunked":
			body = httputil.NewChunkedReader(br)
		case length >= 0:
			body = io.LimitReader(br, length)
		default: // to the connection's end
			body, a.reuse = br, false
		}
		if a.body, err = io.ReadAll(io.LimitReader(body, limit)); err != nil {
			return a, err
		}
		// A body longer than kept is not read on: the connection goes.
		if n, _ := io.ReadFull(body, make([]byte, 1)); n > 0 {
			a.reuse = false
		} else if framing == "chunked" {
			// The last chunk is followed by trailers and an empty line.
			for {
				line, err := readH1Line(br)
				if err != nil {
					return a, err
				}
				if len(line) == 0 {
					break
				}
			}
		}
		return a, nil
	}
}

// readH1Head reads the status line and the headers. framing is the
// Transfer-Encoding, length the Content-Length (-1: none).
func readH1Head(br *bufio.Reader) (a h1Answer, framing string, length int64, err error) {
	line, err := readH1Line(br)
	if err != nil {
		return a, "", 0, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return a, "", 0, badAnswer("status line", line)
	}
	if a.status = atoi3(line[9:12]); a.status < 100 {
		return a, "", 0, badAnswer("status line", line)
	}
	a.reuse, length = line[7] == '1', -1 // HTTP/1.0 closes by default
	errAnswer := a.status < 200 || a.status >= 300
	if errAnswer {
		a.header = http.Header{}
	}
	for {
		line, err := readH1Line(br)
		if err != nil {
			return a, "", 0, err
		}
		if len(line) == 0 {
			return a, framing, length, nil
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, "", 0, badAnswer("header", line)
		}
		key := textproto.CanonicalMIMEHeaderKey(string(bytes.TrimSpace(k)))
		val := string(bytes.TrimSpace(v))
		switch key {
		case "Content-Length":
			if length, err = strconv.ParseInt(val, 10, 64); err != nil || length < 0 {
				return a, "", 0, badAnswer("Content-Length", v)
			}
		case "Transfer-Encoding":
			framing = val
			if val != "chunked" {
				return a, "", 0, badAnswer("Transfer-Encoding", v)
			}
		case "Connection":
			if textproto.TrimString(val) == "close" {
				a.reuse = false
			} else if val == "keep-alive" {
				a.reuse = true
			}
		}
		if errAnswer {
			a.header.Add(key, val)
		}
	}
}

// badAnswer is kept out of the parser's frame (it runs on a worker's
// stack: see h1Send.answer).
//
//go:noinline
func badAnswer(what string, b []byte) error {
	return fmt.Errorf("%w: %s %q", errBadAnswer, what, b)
}

// atoi3 reads a three-digit status code; -1 if it is not one.
func atoi3(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// maxH1Line bounds a status or header line.
const maxH1Line = 16 << 10

// readH1Line reads one line without its CRLF; the slice is valid until the
// next read.
func readH1Line(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// Longer than the read buffer: rare, gathered on the heap.
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxH1Line {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}
