// GET (and HEAD) of the dashboard: index.html for every path that is not the API's, content-
// hashed files under /assets/. Files are read on each request so a rebuilt dashboard is served
// without a restart; they are small, and httplib compresses them when the browser accepts it.
#include "common/file_util.h"
#include "controlplane/http/routes.h"
#include "controlplane/http/web_files.h"

namespace controlplane::http {

using A = Router::Auth;

void AddWebRoutes(Router& router, const ApiDeps& deps) {
  // The API's own paths stay out of this route so that their unknown sub-paths get the JSON 404.
  router.HandleRegex("GET", R"(/(?!v1(?:/|$)|metrics$|healthz$|readyz$).*)", "web", A::kNone,
      [web_dir = deps.web_dir](const httplib::Request& req, httplib::Response& res,
                               RequestContext&) {
        auto file = ResolveWebPath(web_dir, req.path);
        if (!file.ok()) {
          res.set_header("Cache-Control", kRevalidateCache);
          return RespondError(res, file.status());
        }
        auto body = common::ReadFile(file->path);
        if (!body.ok()) {
          res.status = 503;
          res.set_header("Cache-Control", kRevalidateCache);
          res.set_content("The dashboard is not built: no " + file->path +
                              " (build the embody-web target, or pass --web-dir).\n",
                          "text/plain; charset=utf-8");
          return;
        }
        res.status = 200;
        res.set_header("Cache-Control", file->cache_control);
        res.set_header("X-Content-Type-Options", "nosniff");
        if (file->content_type.rfind("text/html", 0) == 0) {
          // The page talks only to this server; it is never framed.
          res.set_header("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self' "
                         "'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'");
          res.set_header("Referrer-Policy", "no-referrer");
        }
        res.set_content(std::move(*body), file->content_type);
      });
}

}  // namespace controlplane::http
