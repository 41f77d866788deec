#pragma once
// SIGINT and SIGTERM as a request to stop after the current unit of work (a point, a replication, a
// profiled kernel), so that what is finished is kept and --resume completes the rest.
namespace kstudy::platform {

// Records SIGINT and SIGTERM instead of dying on them. No SA_RESTART: a blocking wait returns EINTR,
// so the waiter can act on the request (run_process passes it on to its child).
void install_stop_handlers();

// The signal that asked this process to stop, or 0.
int stop_requested();

}  // namespace kstudy::platform
