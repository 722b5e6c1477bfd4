#include "support/serve_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <thread>

#include "support/http_client.hpp"
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

std::string TestTmpDir() {
    const char* dir = std::getenv("PAYLEDGER_TEST_TMPDIR");
    return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string("/tmp");
}

std::string MakeTestTmpDir(const std::string& prefix) {
    std::string pattern = TestTmpDir() + "/" + prefix + "XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    return pattern;
}

unsigned short FreePort() {
    // The port stays free only until the child binds it, a while later. The kernel hands out
    // ports from the ephemeral range to every bind(0) and connect() of the tests running beside
    // this one, so the port is taken from just below that range, where only another FreePort
    // (at random, among thousands) could pick it too.
    int low = 32768;
    std::ifstream{"/proc/sys/net/ipv4/ip_local_port_range"} >> low;
    const int top = std::max(low, 2048);
    const int bottom = std::max(1024, top - 12000);
    static std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> pick{bottom, top - 1};
    for (int attempt = 0; attempt < 1000; ++attempt) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(static_cast<unsigned short>(pick(random)));
        const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
        close(fd);
        if (free) return ntohs(address.sin_port);
    }
    ADD_FAILURE() << "no free port below the ephemeral range";
    return 0;
}

bool AwaitListening(unsigned short port, pid_t* child) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (std::chrono::steady_clock::now() < deadline) {
        if (child != nullptr && waitpid(*child, nullptr, WNOHANG) == *child) {
            *child = -1;  // It exited (and is reaped): it will never listen.
            return false;
        }
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
                           unsigned short port, long open_files_max, Await await)
    : port_(port == 0 ? FreePort() : port), open_files_max_(open_files_max), await_(await) {
    const std::string base =
        TestTmpDir() + "/payledger-serve-" + std::to_string(getpid()) + "-" + std::to_string(port_);
    config_path_ = base + ".json";
    log_path_ = base + ".log";
    nlohmann::json config = {
        {"listen", "127.0.0.1:" + std::to_string(port_)},
        {"database_url", database_url},
        {"tokens",
         {{"merchant", {kMerchantToken}}, {"auditor", {kAuditorToken}}, {"admin", {kAdminToken}}}},
        {"generic", {{"secret", kGenericSecret}}}};
    config.update(extra);
    {
        // serve refuses a config file that other users may read.
        const int fd = open(config_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        fchmod(fd, 0600);  // A file left by an earlier run keeps its mode through O_TRUNC.
        const std::string text = config.dump(2);
        EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
        close(fd);
    }
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
        if (open_files_max_ > 0) {
            const rlimit limit{.rlim_cur = static_cast<rlim_t>(open_files_max_),
                               .rlim_max = static_cast<rlim_t>(open_files_max_)};
            setrlimit(RLIMIT_NOFILE, &limit);
        }
        execl(PAYLEDGER_BINARY_PATH, PAYLEDGER_BINARY_PATH, "serve", "--config",
              config_path_.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    ASSERT_GT(pid_, 0);
    if (!AwaitListening(port_, &pid_)) {
        std::ifstream log{log_path_};
        const std::string text{std::istreambuf_iterator<char>{log}, {}};
        FAIL() << "payledger serve did not start on port " << port_ << "; its log:\n" << text;
    }
    if (await_ == Await::kListening) return;
    // serve listens before its database is reached and migrated; ready is /readyz.
    HttpClient client{port_};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (client.Get("/readyz").status != 200) {
        const bool exited = waitpid(pid_, nullptr, WNOHANG) == pid_;
        if (exited || std::chrono::steady_clock::now() > deadline) {
            if (exited) {
                pid_ = -1;
            } else {
                Kill();
            }
            std::ifstream log{log_path_};
            const std::string text{std::istreambuf_iterator<char>{log}, {}};
            FAIL() << "payledger serve on port " << port_ << " never got ready; its log:\n" << text;
        }
        // Its database is being reached or migrated: nothing to synchronise on but /readyz.
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
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
