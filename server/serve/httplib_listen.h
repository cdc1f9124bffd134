// Binding an httplib server the way both of kvserve's HTTP ports need: SO_REUSEADDR without
// httplib's default SO_REUSEPORT (which lets a second server bind the same port in silence and
// split the traffic), and a listen backlog wider than the 5 Debian's libcpp-httplib is compiled
// with (16 clients connecting at once overflowed it; the dropped SYNs were retried after 1 s).
#pragma once
#include <string>

namespace httplib {
class Server;
}

namespace kvserve {

// Sets the socket options on `http` and binds host:port (0: any free port). Returns the bound
// port, or -1 when the address cannot be bound. Call before listen_after_bind().
int BindHttpServer(httplib::Server& http, const std::string& host, int port);

}  // namespace kvserve
