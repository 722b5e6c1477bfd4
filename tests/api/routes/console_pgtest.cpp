// The console through the whole server: the static files are
// answered on the real HTTP path (/console, /console/, a file, a query string, an unknown file,
// a path that only starts like the console), and a GET of /v1/admin/verify tells an admin
// token (405) from the others (403, 401) without running verify, which is how the console
// decides whether to offer the verify button. The service runs in-process on a free port.
#include <gtest/gtest.h>

#include "api/routes/console.hpp"
#include "support/test_database.hpp"
#include "support/test_service.hpp"

namespace payledger::api {
namespace {

using testing::HttpClient;
using testing::HttpResult;
using testing::TestDatabase;
using testing::TestService;

class ConsolePgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        service_ = std::make_unique<TestService>(testing::TestConfig(db_.url()), db_.name());
        client_ = std::make_unique<HttpClient>(service_->port());
    }

    TestDatabase db_;
    std::unique_ptr<TestService> service_;
    std::unique_ptr<HttpClient> client_;
};

TEST_F(ConsolePgTest, TheFilesAreServedOnTheRealPath) {
    const HttpResult index = client_->Get("/console/");
    EXPECT_EQ(index.status, 200);
    EXPECT_EQ(index.headers.at("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(index.headers.at("Content-Security-Policy"), kConsoleContentSecurityPolicy);
    EXPECT_EQ(index.headers.at("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(index.body, FindConsoleAsset("index.html")->body);
    EXPECT_EQ(client_->Get("/console/?from=a-link").body, index.body);  // A query changes nothing.

    const HttpResult bare = client_->Get("/console");
    EXPECT_EQ(bare.status, 301);
    EXPECT_EQ(bare.headers.at("Location"), "/console/");

    const HttpResult script = client_->Get("/console/app.js");
    EXPECT_EQ(script.status, 200);
    EXPECT_EQ(script.headers.at("Content-Type"), "text/javascript; charset=utf-8");
    EXPECT_EQ(script.headers.at("ETag"), FindConsoleAsset("app.js")->etag);
    EXPECT_EQ(client_
                  ->Send(boost::beast::http::verb::get, "/console/app.js", "",
                         {{"If-None-Match", std::string(FindConsoleAsset("app.js")->etag)}})
                  .status,
              304);

    for (const char* target : {"/console/nope.js", "/console/%2e%2e/CMakeLists.txt",
                               "/console/a/app.js", "/consolex", "/console.js"}) {
        EXPECT_EQ(client_->Get(target).status, 404) << target;
    }
    EXPECT_EQ(client_->Post("/console/", "token=x").status, 405);
}

TEST_F(ConsolePgTest, AGetOfAdminVerifyTellsAnAdminTokenFromTheOthers) {
    EXPECT_EQ(client_->Get("/v1/admin/verify", testing::kAdminToken).status, 405);
    EXPECT_EQ(client_->Get("/v1/admin/verify", testing::kAuditorToken).status, 403);
    EXPECT_EQ(client_->Get("/v1/admin/verify", testing::kMerchantToken).status, 403);
    EXPECT_EQ(client_->Get("/v1/admin/verify").status, 401);
    EXPECT_EQ(client_->Get("/v1/admin/verify", "not-a-token-of-anyone").status, 401);
    const HttpResult verified =
        client_->Send(boost::beast::http::verb::post, "/v1/admin/verify", "",
                      {{"Authorization", std::string("Bearer ") + testing::kAdminToken}});
    EXPECT_EQ(verified.status, 200) << verified.body;
}

}  // namespace
}  // namespace payledger::api
