// gRPC's own log lines (a failed TLS handshake, a malformed frame) come once per bad
// connection, so a client could flood the server's log. This passes at most a few lines a
// second to stderr and says how many it dropped.
#pragma once

namespace kvserve {

// Installs the limiting log function for gRPC (process-wide; call once before the server).
void LimitGrpcLogging();

}  // namespace kvserve
