#include "support/serve_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/test_service.hpp"

namespace payledger::testing {
namespace {

long ProcStatusKiB(pid_t pid, const std::string& field) {
    std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    }
    return -1;
}

}  // namespace

unsigned short FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t size = sizeof address;
    bind(fd, reinterpret_cast<sockaddr*>(&address), size);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    close(fd);
    return ntohs(address.sin_port);
}

bool AwaitListening(unsigned short port) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{20};
    while (std::chrono::steady_clock::now() < deadline) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(port);
        const int result = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
        close(fd);
        if (result == 0) return true;
        // The server is still starting: nothing to synchronise on but its socket.
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return false;
}

ServeProcess::ServeProcess(const std::string& database_url, const nlohmann::json& extra,
                           unsigned short port)
    : port_(port == 0 ? FreePort() : port) {
    const std::string base =
        "/tmp/payledger-serve-" + std::to_string(getpid()) + "-" + std::to_string(port_);
    config_path_ = base + ".json";
    log_path_ = base + ".log";
    nlohmann::json config = {
        {"listen", "127.0.0.1:" + std::to_string(port_)},
        {"database_url", database_url},
        {"tokens",
         {{"merchant", {kMerchantToken}}, {"auditor", {kAuditorToken}}, {"admin", {kAdminToken}}}},
        {"generic", {{"secret", kGenericSecret}}}};
    config.update(extra);
    std::ofstream{config_path_} << config.dump(2);
    Start();
}

ServeProcess::~ServeProcess() {
    if (pid_ > 0) Kill();
    std::remove(config_path_.c_str());
    std::remove(log_path_.c_str());
}

void ServeProcess::Start() {
    pid_ = fork();
    if (pid_ == 0) {
        const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(log, STDERR_FILENO);
        dup2(log, STDOUT_FILENO);
        execl(PAYLEDGER_BINARY_PATH, PAYLEDGER_BINARY_PATH, "serve", "--config",
              config_path_.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    ASSERT_GT(pid_, 0);
    ASSERT_TRUE(AwaitListening(port_)) << "payledger serve did not start; see " << log_path_;
}

void ServeProcess::Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

int ServeProcess::Terminate() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

long ServeProcess::RssKiB() const { return ProcStatusKiB(pid_, "VmRSS"); }
long ServeProcess::PeakRssKiB() const { return ProcStatusKiB(pid_, "VmHWM"); }

}  // namespace payledger::testing
