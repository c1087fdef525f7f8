/* The navigation's browser side (app/dashboard/factory.py calls it through
 * dash.ClientsideFunction("pages", "show")).  Every page's body is on the page; the one whose
 * path the location shows is displayed.  Merged into window.dash_clientside so the other
 * namespaces survive. */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
    pages: {
        /* [each page body's style..., each link's class...] for the location's pathname;
         * cfg.paths lists the pages' paths in that order (an unknown path: the first). */
        show: function(pathname, cfg) {
            const paths = cfg.paths;
            // the server serves "/screenshots/" and "//screenshots" as "/screenshots"
            // (factory._not_found_off_the_pages): read them as that page, not the first one
            const path = '/' + (pathname || '/').split('/').filter(Boolean).join('/');
            let on = paths.indexOf(path);
            if (on < 0) on = 0;
            const styles = paths.map((_, i) => ({display: i === on ? '' : 'none'}));
            const classes = paths.map((_, i) => i === on ? 'tl-tab tl-tab-on' : 'tl-tab');
            return styles.concat(classes);
        }
    }
});
