package objstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is an HTTP reverse proxy on loopback in front of a Store that can
// tear uploads: while Tear's pattern is set, a PUT or POST whose path and
// query (unescaped) match it is sent on to the server with only part of
// its body, that connection to the server is broken off, and the client's
// connection is cut without an answer. Every other request passes.
type Proxy struct {
	ln    net.Listener
	srv   *http.Server
	rp    *httputil.ReverseProxy
	up    *url.URL
	tr    *http.Transport
	mu    sync.Mutex
	tear  *regexp.Regexp
	torn  atomic.Int64
	close sync.Once
}

// NewProxy starts a proxy in front of the server at endpoint
// (http://host:port).
func NewProxy(endpoint string) (*Proxy, error) {
	up, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("objstore: proxy target: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("objstore: proxy: %w", err)
	}
	tr := &http.Transport{}
	p := &Proxy{ln: ln, up: up, tr: tr}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// SetURL also sends the server's host in the Host header:
			// fake-gcs-server routes object reads by it. (moto and
			// Azurite do not check signatures over it.)
			r.SetURL(up)
		},
		Transport: tr,
		ErrorLog:  nil,
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// HostPort is the proxy's host:port.
func (p *Proxy) HostPort() string { return p.ln.Addr().String() }

// Tear sets the pattern of the uploads to tear (nil: none).
func (p *Proxy) Tear(re *regexp.Regexp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tear = re
}

// Torn returns how many requests were torn so far.
func (p *Proxy) Torn() int64 { return p.torn.Load() }

// Close stops the proxy and its connections.
func (p *Proxy) Close() error {
	var err error
	p.close.Do(func() {
		err = p.srv.Close()
		p.tr.CloseIdleConnections()
	})
	return err
}

// ServeHTTP forwards r, or tears it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	re := p.tear
	p.mu.Unlock()
	target := r.URL.Path
	if q, err := url.QueryUnescape(r.URL.RawQuery); err == nil && q != "" {
		target += "?" + q
	}
	if re == nil || (r.Method != http.MethodPut && r.Method != http.MethodPost) || !re.MatchString(target) {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.torn.Add(1)
	// Send the server the headers and part of the body, then fail the
	// body: the transport breaks the connection off mid-request.
	keep := int64(1)
	if r.ContentLength > 2 {
		keep = r.ContentLength / 2
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = p.up.Scheme, p.up.Host, p.up.Host
	out.Body = io.NopCloser(io.MultiReader(io.LimitReader(r.Body, keep), errReader{}))
	if resp, err := p.tr.RoundTrip(out); err == nil {
		resp.Body.Close()
	}
	// Cut the client's connection without an answer.
	panic(http.ErrAbortHandler)
}

// errReader fails every read: the torn part of a body.
type errReader struct{}

func (errReader) Read([]byte) (int, error) {
	return 0, errors.New("objstore: upload torn by the proxy")
}
