package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Loopback reports whether a listener accepts connections only from this
// host: a TCP address on a loopback IP (127.0.0.0/8, ::1). Anything else,
// including the unspecified address (0.0.0.0, ::), is not.
func Loopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// OperatorAccess describes how ServeOperator serves a listener: "plain HTTP
// (loopback only)" or "HTTPS, client certificate from the deployment CA".
func OperatorAccess(l net.Listener) string {
	if Loopback(l.Addr()) {
		return "plain HTTP (loopback only)"
	}
	return "HTTPS, client certificate of a trusted domain required"
}

// CheckOperatorListener checks that ServeOperator can serve l: a listener
// that is not on a loopback address needs credentials.
func CheckOperatorListener(l net.Listener, creds *Credentials) error {
	if !Loopback(l.Addr()) && creds == nil {
		return fmt.Errorf("%s is not a loopback address: serving it needs TLS credentials (without them, listen on 127.0.0.1 or ::1)", l.Addr())
	}
	return nil
}

// ServeOperator serves an operator's page h on l until ctx is done. On a
// loopback address (see Loopback) it serves plain HTTP: only users of this
// host reach it. On any other address it serves HTTPS (TLS 1.3) with the
// node's certificate and requires a client certificate from the deployment's
// CA carrying a fedpca identity (other clients fail the TLS handshake,
// logged at debug level on log) whose role may read the operator pages
// (Authorization[OperatorPages]: operator); other roles get 403 Forbidden
// with the reason. Without credentials a non-loopback listener is refused.
// Every response carries headers that forbid framing, sniffing, caching and
// any script.
func ServeOperator(ctx context.Context, l net.Listener, creds *Credentials, h http.Handler, log hclog.Logger) error {
	if err := CheckOperatorListener(l, creds); err != nil {
		return err
	}
	srv := &http.Server{Handler: secureHeaders(h), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})}
	if Loopback(l.Addr()) {
		return serveHTTP(ctx, srv, l, false)
	}
	srv.TLSConfig = creds.ServerTLS()
	srv.Handler = operatorsOnly(srv.Handler)
	return serveHTTP(ctx, srv, l, true)
}

// operatorsOnly answers 403 to a client whose certificate's role may not
// read the operator pages.
func operatorsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id Identity
		err := errors.New("no client certificate")
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			id, err = IdentityOf(r.TLS.PeerCertificates[0])
		}
		if err != nil || !Allowed(OperatorPages, id.Role) {
			who := "this client"
			if err == nil {
				who = id.Short()
			}
			http.Error(w, fmt.Sprintf("403 forbidden: %s may not read the operator pages; they need a certificate of role %s from a trust domain this node accepts it from (fedpca certs issue operator/NAME)",
				who, strings.Join(Authorization[OperatorPages], " or ")), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveHTTP runs srv on l until ctx is done, then shuts it down.
func serveHTTP(ctx context.Context, srv *http.Server, l net.Listener, useTLS bool) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	var err error
	if useTLS {
		err = srv.ServeTLS(l, "", "") // the certificate is in srv.TLSConfig
	} else {
		err = srv.Serve(l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
