// See httplib_listen.h.
#include "server/serve/httplib_listen.h"

#include <sys/socket.h>

#include <memory>

#include "httplib.h"

namespace kvserve {

int BindHttpServer(httplib::Server& http, const std::string& host, int port) {
  // The listening socket is remembered (the last one httplib made) to widen its backlog below.
  auto listen_fd = std::make_shared<int>(-1);
  http.set_socket_options([listen_fd](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listen_fd = sock;
  });
  const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  // listen() again on a listening socket only changes its backlog.
  if (bound >= 0 && *listen_fd >= 0) ::listen(*listen_fd, SOMAXCONN);
  return bound;
}

}  // namespace kvserve
