/*
 * Clientside callbacks of the live page, called through dash.ClientsideFunction("live", name)
 * (app/dashboard/factory.py wires them). No element id is written here: a function reads the
 * ids of its inputs from callback_context, and constants come from the page's CLIENT_CONFIG
 * store (Python's STUCK_MS and PRESETS), so the Python side stays the one place for both.
 */
window.dash_clientside = window.dash_clientside || {};

(function () {
    "use strict";

    // Epoch ms of a time-axis value. plotly.js shows a number on a date axis in the browser's
    // zone (through a JS Date) and reports axis positions as that wall-clock text, so the text
    // is read back in the same zone: new Date(y, m, d, ...) is local time.
    function localMs(v) {
        if (typeof v === "number") return v;
        const m = String(v).trim().match(
            /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?(?:\.(\d+))?)?$/);
        if (!m) return NaN;
        const frac = m[7] ? Number("0." + m[7]) * 1000 : 0;
        return new Date(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0))
            .getTime() + frac;
    }

    // The plotly div inside the dcc.Graph whose id is graphId.
    function plotDiv(graphId) {
        return document.querySelector("#" + CSS.escape(graphId) + " .js-plotly-plot");
    }

    // The positions of the inputs that fired among the callback's inputs, in their order
    // there.  Several fire in one call when their changes land in one batch: a click on a
    // preset while a busy page redraws its figure (plotly reports an autorange) comes with
    // the graph's relayoutData, which is first; reading only the first lost the click.
    function firedInputs() {
        const ctx = window.dash_clientside.callback_context;
        const fired = new Set(ctx.triggered.map((t) => t.prop_id));
        const out = [];
        ctx.inputs_list.forEach((inp, k) => {
            if (fired.has(inp.id + "." + inp.property)) out.push(k);
        });
        return out;
    }

    // A zoom, pan, double-click or autorange of the graph as an action (null: none asked).
    function relayoutAction(relayout, state) {
        if (!relayout) return null;
        let r0 = null, r1 = null, auto = false;
        for (const k in relayout) {
            if (/^xaxis\d*\.range\[0\]$/.test(k)) r0 = relayout[k];
            else if (/^xaxis\d*\.range\[1\]$/.test(k)) r1 = relayout[k];
            else if (/^xaxis\d*\.range$/.test(k)) { r0 = relayout[k][0]; r1 = relayout[k][1]; }
            else if (/^xaxis\d*\.autorange$/.test(k) && relayout[k]) auto = true;
        }
        if (r0 !== null && r1 !== null) return {kind: "range", t0: localMs(r0), t1: localMs(r1)};
        // a double-click resets a zoomed range to the whole session; plotly also reports
        // autorange when a followed figure is drawn, which is no request
        if (auto && state && state.mode === "range") return {kind: "all"};
        return null;
    }

    // Sample-to-screen latency, measured in the page (see app/dashboard/factory.py's docstring).
    function latencyText(state, graphId) {
        const L = window.__tlLat = window.__tlLat ||
            {lat: [], offs: [], edge: null, follow: false, bin: 100, lane: 0, off: 0};
        // browser clock minus server clock: 0 unless causality says otherwise (an answer made
        // before it was asked, or arriving before it was made, by the browser's clock)
        L.offs.push([state.asked === null || state.asked === undefined ? -Infinity
                     : state.asked - state.sent, Date.now() - state.sent]);
        if (L.offs.length > 200) L.offs.shift();
        const ahead = Math.max.apply(null, L.offs.map((o) => o[0]));
        const behind = Math.min.apply(null, L.offs.map((o) => o[1]));
        L.off = ahead > 0 ? ahead : (behind < 0 ? behind : 0);
        L.follow = state.mode === "follow" && !!state.follow;
        L.bin = state.bin_ms || 100;
        L.lane = state.lane || 0;
        const gd = plotDiv(graphId);
        if (gd && gd.on && !gd.__tlLatency) {
            gd.__tlLatency = true;
            // every redraw: the bins drawn for the first time are on screen now
            gd.on("plotly_afterplot", () => {
                const t = gd._fullData && gd._fullData[L.lane];
                const x = t && t.x;
                if (!L.follow || !x || !x.length) { L.edge = null; return; }
                const edge = x[x.length - 1] + L.bin / 2;
                if (L.edge !== null && edge > L.edge && edge - L.edge < 5000) {
                    const paint = Date.now() - L.off;
                    for (let e = L.edge + L.bin; e <= edge + 0.5; e += L.bin) {
                        L.lat.push(paint - (e - L.bin / 2));
                    }
                    while (L.lat.length > 600) L.lat.shift();  // the last minute of bins
                }
                L.edge = edge;
            });
        }
        if (!L.follow) return "sample → screen: measured while following (10 s, 1 min, 10 min)";
        if (L.lat.length < 5) return "sample → screen: measuring…";
        const s = L.lat.slice().sort((a, b) => a - b);
        if (s[0] < -1000) return "sample → screen: n/a (sample stamps run ahead of the clock: " +
                                 "a replay faster than real time)";
        const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
        return "sample → screen p50 " + Math.round(q(0.5)) + " ms · p95 " +
               Math.round(q(0.95)) + " ms (last " + s.length + " bins)";
    }

    // The live graph's update pacing (``tick``): when it was last drawn (browser ms) and what
    // an update cost from asking to drawn (ms, a moving average).
    function paceOf(graphId) {
        const P = window.__tlPace = window.__tlPace || {done: -Infinity, cost: 0, asked: null};
        const gd = plotDiv(graphId);
        if (gd && gd.on && !gd.__tlPace) {
            gd.__tlPace = true;
            gd.on("plotly_afterplot", () => {
                const t = Date.now();
                if (P.asked !== null && t - P.asked < 10000) {
                    P.cost = P.cost ? 0.7 * P.cost + 0.3 * (t - P.asked) : t - P.asked;
                }
                P.asked = null;
                P.done = t;
            });
        }
        return P;
    }

    window.dash_clientside.live = Object.assign({}, window.dash_clientside.live, {
        // The interval asks for an update only when none is in flight (or one is stuck).
        // A request stuck past stuck_ms is asked again; each retry in a row waits twice as
        // long (up to 16x), so an answer slower than the wait (a loaded server building a
        // long range) still lands instead of being superseded by the next retry forever.
        // The count is kept per output (the live pull, the balance panel's pull).
        tick: function (n, busy, pull, config) {
            const nu = window.dash_clientside.no_update;
            const now = Date.now();
            const ctx = window.dash_clientside.callback_context;
            const out = ctx && ctx.outputs_list && ctx.outputs_list[0];
            const key = out && out.id ? String(out.id) : "tick";
            const stuck = window.__tlStuck = window.__tlStuck || {};
            if (busy === null || busy === undefined) {
                stuck[key] = 0;
                if (key === config.pace_id) {
                    // paced: the next update waits after the last redraw for `pace` times
                    // what an update took from asking to drawn (so pages on a loaded machine
                    // ask less often rather than queue behind each other)
                    const P = paceOf(config.graph_id);
                    const L = window.__tlLat;
                    // a page not following the live edge has nothing new to draw: it asks
                    // once per idle_ms (for the status line), not on every interval
                    const gap = L && L.follow === false ? config.idle_ms
                                                        : config.pace * P.cost;
                    if (now - Math.max(P.done, P.askedAt || -Infinity) < gap) return [nu, nu];
                    P.askedAt = now;
                    P.asked = now;
                }
                return [(pull || 0) + 1, now];
            }
            const wait = config.stuck_ms * Math.pow(2, Math.min(stuck[key] || 0, 4));
            if (now - busy < wait) return [nu, nu];
            stuck[key] = (stuck[key] || 0) + 1;
            return [(pull || 0) + 1, now];
        },

        // Every user action becomes one ACTION, stamped, and marks a request in flight.
        // Inputs, in order: the graph's relayoutData, the preset buttons (config.presets:
        // their spans, null for "all"), follow, "show range", the two time fields (Enter),
        // band order, session, the clicked time; then the two typed times and the cursor as
        // State.  A click on the figure while it follows the live edge pauses it, so the
        // window it selects stays on screen (the page says why it paused).
        action: function () {
            const nu = window.dash_clientside.no_update;
            const args = Array.prototype.slice.call(arguments);
            const config = args[args.length - 1];
            const state = args[args.length - 2];
            const spans = config.presets;
            const nPre = spans.length;
            const graphId = window.dash_clientside.callback_context.inputs_list[0].id;
            const [tfrom, tto] = args.slice(args.length - 4, args.length - 2);
            // the inputs that fired, the graph's own relayout last: a button, a typed range or
            // a pick is what the user asked for, a relayout may be plotly's redraw
            const fired = firedInputs();
            const order = fired.filter((k) => k !== 0).concat(fired.filter((k) => k === 0));
            let a = null;
            for (const i of order) {
                if (i === 0) a = relayoutAction(args[0], state);
                else if (i >= 1 && i <= nPre) {
                    const span = spans[i - 1];
                    a = span === null ? {kind: "all"} : {kind: "preset", span: span};
                } else if (i === nPre + 1) a = {kind: "follow", want: !(state && state.follow)};
                else if (i >= nPre + 2 && i <= nPre + 4) a = {kind: "go", from: tfrom, to: tto};
                else if (i === nPre + 5) a = {kind: "order", by: args[i]};
                else if (i === nPre + 6 && args[i]) a = {kind: "session", value: args[i]};
                else if (i === nPre + 7 && Number.isFinite(args[i]) && state && state.follow &&
                         state.mode === "follow") {
                    a = {kind: "follow", want: false, why: "select", t: args[i]};
                }
                if (a !== null) break;
            }
            if (a === null) return [nu, nu];
            const gd = plotDiv(graphId);
            a.px = gd && gd._fullLayout && gd._fullLayout._size ? gd._fullLayout._size.w : null;
            a.n = Date.now();
            return [a, Date.now()];
        },

        // The time (epoch ms) of the point under the cursor or clicked.
        pointTime: function (data) {
            if (!data || !data.points || !data.points.length) {
                return window.dash_clientside.no_update;
            }
            const t = localMs(data.points[0].x);
            return Number.isFinite(t) ? t : window.dash_clientside.no_update;
        },

        latency: function (state, graphId) {
            if (!state || state.sent === null || state.sent === undefined) {
                return window.dash_clientside.no_update;
            }
            return latencyText(state, graphId);
        },

        // The browser's time zone, once per page: plotly shows the time axis in it, so every
        // time on every page (live and screenshots) uses it.
        zone: function (v) {
            if (v) return window.dash_clientside.no_update;
            try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; }
            catch (e) { return "UTC"; }
        },

        zoneLabel: function (z) { return z || "UTC"; },
    });
})();
