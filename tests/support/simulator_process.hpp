#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "support/serve_process.hpp"

namespace payledger::testing {

// `payledger simulate-platform --listen 127.0.0.1:<port> --config <config_path>` as a child
// process, its standard output and error appended to `<config_path>.log`. The constructor
// returns once the simulator accepts connections or has exited (listening() tells which); the
// destructor stops it with SIGTERM and reaps it. Not thread-safe: one test thread owns it.
// REQUIRES: PAYLEDGER_BINARY_PATH names the payledger binary (pg_tests defines it).
class SimulatorProcess {
public:
    SimulatorProcess(const std::string& config_path, unsigned short port) {
        const std::string log_path = config_path + ".log";
        const std::string listen = "127.0.0.1:" + std::to_string(port);
        pid_ = fork();
        if (pid_ == 0) {
            const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
            dup2(log, STDERR_FILENO);
            dup2(log, STDOUT_FILENO);
            execl(PAYLEDGER_BINARY_PATH, PAYLEDGER_BINARY_PATH, "simulate-platform", "--listen",
                  listen.c_str(), "--config", config_path.c_str(), nullptr);
            _exit(127);
        }
        listening_ = AwaitListening(port, &pid_);
    }
    ~SimulatorProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            waitpid(pid_, nullptr, 0);
        }
    }
    SimulatorProcess(const SimulatorProcess&) = delete;
    SimulatorProcess& operator=(const SimulatorProcess&) = delete;

    // True when the simulator accepted a connection before it exited.
    [[nodiscard]] bool listening() const { return listening_; }
    // SIGSTOP and SIGCONT: a platform that accepts and never answers, then answers again.
    void Pause() { kill(pid_, SIGSTOP); }
    void Resume() { kill(pid_, SIGCONT); }

private:
    pid_t pid_ = -1;
    bool listening_ = false;
};

}  // namespace payledger::testing
