// Package httpview serves the leadership of one key over HTTP, for
// operators, probes, dashboards and programs: a JSON view, liveness and
// readiness probes, a Server-Sent Events stream of leadership changes and
// a live web page, all from one [http.Handler] that a program mounts.
//
// A candidate mounts it with its elector; an observer that never
// campaigns (`tenure watch`) mounts it without one, so one dashboard can
// serve a whole group:
//
//	view, err := httpview.New(httpview.Options{Key: cfg.Key, Store: cfg.Store})
//	cfg.OnEvent = view.OnEvent(cfg.OnEvent) // keeps an existing OnEvent
//	elector, err := tenure.New(cfg)
//	err = view.SetElector(elector) // skip for an observer
//	go view.Run(ctx)               // follow the store
//	http.Handle("/", view)
//
// A program that already follows the key (and feeds a metrics collector
// from the same [tenure.Observer]) calls [Handler.Follow] with its records
// instead of Run, or [Handler.Observe] per record, so the key is watched
// once.
//
// # Routes
//
//   - GET / with Accept: application/json (or no Accept header): the
//     [Leader] document, {"name", "key", "term", "is_self", "since",
//     "renew_time", "lease_duration", "transitions", "value", ...}. Name
//     keeps the leader-elector sidecar convention ({"name": ...}).
//   - GET / with Accept: text/html: a live page showing the key, who
//     leads, the term, the leader's published value, for how long, the
//     candidates seen, the candidates registered (from /candidates) and a
//     timeline of recent leadership changes that redraws on every /events
//     event.
//     Everything it needs is embedded in the binary; it loads nothing from
//     elsewhere.
//   - /healthz: liveness. With an elector, 200 while
//     [tenure.Elector.Healthy] returns nil and 503 with the reason when a
//     leader stopped renewing or its task stalled and overran; without
//     one, 200 while a read of the key succeeds (one read a second at
//     most, shared by the checks that come meanwhile).
//   - /readyz: 200 only on a healthy leader, 503 on followers and
//     observers; /readyz?standbyok makes healthy followers and observers
//     200 too.
//   - /events: text/event-stream. The current view at once, then one
//     event named "leader" per leadership change (a new term with a
//     holder, or the key becoming free), and one when this process's own
//     elector is elected or steps down (is_self changes), each with the
//     JSON view as data. With [Options.MaxStreams] streams open, a new
//     stream ends the oldest one of the remote address that holds the
//     most (see [Options.MaxStreams]), whose EventSource reconnects: one
//     address's streams never keep another's out.
//   - /candidates: the candidates registered for the key by electors with
//     [tenure.Config.Control] (as `tenure status --candidates` lists them),
//     best first: {"key", "candidates": [{"id", "priority", "since",
//     "leading"}]}; 503 when they cannot be read (peer stores keep no
//     registry); 400, reading nothing, when the key is itself one kept
//     beside another key ([tenure.BaseKey]), whose record the view still
//     shows. The view reads the [tenure.CandidateSlots] keys at most once
//     a second, however fast requests come: requests within a second of a
//     read share it.
//   - /metrics: [Options.Metrics], if set; 404 otherwise. Package
//     promtenure provides Prometheus metrics to put there.
//
// Every route answers GET, HEAD and OPTIONS (as GET: a load balancer's
// health check may send it; HEAD and OPTIONS /events: the headers, and no
// stream); other methods get 405 with Allow: the view changes nothing.
//
// The JSON answers and /events data write the runes a terminal would obey
// or reorder text by (C1 controls, bidi overrides, zero-width characters),
// which a holder or value written into the store from outside can hold,
// as \u escapes, which decode to the same strings: an operator may read
// them with curl. Every answer has a Content-Type and says
// X-Content-Type-Options: nosniff, so no browser takes a holder or value
// for markup.
//
// # Guarantees and non-guarantees
//
// The view learns of changes from the store's watch ([Handler.Run]) and,
// faster, from the elector's events ([Handler.OnEvent]); both go through
// the same rule (terms never go back), so each change is shown and
// published once, in term order. The one exception is the store's: once
// the watch delivers a term older than one it delivered, which it does
// only after the store showed it alone for a TTL (a term written far above
// the key's counter has gone, a backup was restored), the view shows that
// term, as a new one, and goes on from there. Terms shorter than the
// store's watch delivery can be missed, as by any [tenure.Observer].
// Times are on the view's clock (the elector's); renew_time is known only
// to the leader itself and is null elsewhere.
//
// Nothing here blocks the elector: OnEvent takes a short lock and hands
// events to /events clients without waiting; a client more than a few
// events behind is disconnected and, being an EventSource, reconnects and
// gets the current view. Disconnected clients are forgotten at once, and
// a stream whose client stops reading ends when a write has waited 10 s.
// Responses never contain a store's address or credentials: an
// observer's failed health check says only that the key could not be
// read.
//
// The handler has no authentication. It bounds the /events streams
// ([Options.MaxStreams]), which hold their connections, but not the
// connections themselves: that is the server's job. A candidate serving
// it in its own process should bound them, as `tenure run --http` does
// (at most 128 connections, a new one closing the oldest that is idle
// or still sending its request of the remote address holding the most;
// header and idle timeouts on its
// [http.Server]): a flood of connections that takes the process's file
// descriptors makes its next renewal fail, and it steps down. With fewer
// streams allowed than connections, streams cannot take the connections
// probes need.
//
// # Alerting
//
// With promtenure's metrics scraped from every candidate, alert when the
// group does not have exactly one leader for a minute:
//
//	groups:
//	- name: tenure
//	  rules:
//	  - alert: LeaderElectionNotExactlyOneLeader
//	    expr: sum(leader_election_master_status{name="K"}) != 1
//	    for: 1m
//	    annotations:
//	      summary: 'key K has {{ $value }} leaders (want exactly 1)'
package httpview
