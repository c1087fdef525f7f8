/* The Screenshots page's clientside functions (app/dashboard/screenshots/callbacks.py calls
 * them through dash.ClientsideFunction("screenshots", name)).  Element ids and limits come
 * from the server in the config store (ids.SHOT_CONFIG, screenshots/layout.py js_config):
 * {path, detail, max_file, max_batch}.  Merged into window.dash_clientside so the other
 * namespaces survive. */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
    screenshots: {
        /* The pictures' time zone defaults to the browser's (ids.PAGE_TZ, filled once for
         * every page); a zone the user typed stays, an emptied one becomes the browser's again. */
        default_zone: function(pageZone, value) {
            if (value || !pageZone) return window.dash_clientside.no_update;
            return pageZone;
        },

        /* A click on a screenshot marker in the live figure opens it on the Screenshots page:
         * [sha, the page's path]. */
        open_marker: function(data, cfg) {
            const nu = window.dash_clientside.no_update;
            if (!data || !data.points) return [nu, nu];
            for (const p of data.points) {
                if (typeof p.customdata === 'string' && /^[0-9a-f]{64}$/.test(p.customdata)) {
                    return [p.customdata, cfg.path];
                }
            }
            return [nu, nu];
        },

        /* An opened screenshot (list, marker or upload) is scrolled into view once shown. */
        scroll_to_detail: function(sha, cfg) {
            if (!sha) return window.dash_clientside.no_update;
            let tries = 0;
            const go = () => {
                const el = document.getElementById(cfg.detail);
                if (el && el.offsetParent !== null && el.style.display !== 'none') {
                    el.scrollIntoView({behavior: 'smooth', block: 'start'});
                } else if (++tries < 40) { setTimeout(go, 100); }
            };
            setTimeout(go, 150);
            return sha;
        },

        /* The browser keeps back what the server would refuse unread (a file over
         * cfg.max_file bytes; files beyond cfg.max_batch characters in all), so it is named
         * in the messages instead of failing the whole request (HTTP 413):
         * {files: [{name, modified, bytes, content, why}], n}. */
        batch: function(contents, names, modified, cfg) {
            const nu = window.dash_clientside.no_update;
            if (!contents) return nu;
            if (typeof contents === 'string') {
                contents = [contents]; names = [names]; modified = [modified];
            }
            const files = [];
            let total = 0;
            for (let i = 0; i < contents.length; i++) {
                const c = contents[i] || '';
                const bytes = Math.floor((c.length - c.indexOf(',') - 1) * 3 / 4);
                const f = {name: (names || [])[i] || ('upload ' + (i + 1)),
                           modified: (modified || [])[i], bytes: bytes, content: null};
                if (bytes > cfg.max_file) f.why = 'over';
                else if (total + c.length > cfg.max_batch) f.why = 'batch';
                else { f.content = c; total += c.length; }
                files.push(f);
            }
            // Empty the upload (so the same file dropped again is a new drop) outside the
            // callback graph: an Output of SHOT_UPLOAD.contents downstream of this callback
            // makes a cycle, and dash-renderer holds a callback whose inputs a pending
            // callback may still change, so the drop waited for a pause in the live ticks.
            const upload = window.dash_clientside.callback_context.inputs_list[0].id;
            setTimeout(() => window.dash_clientside.set_props(
                upload, {contents: null, filename: null, last_modified: null}), 0);
            return {files: files, n: Date.now()};
        },
    },
});
