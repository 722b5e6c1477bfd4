#include "api/cli/simulate_platform.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <future>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "api/channels/alipay_form.hpp"
#include "api/channels/json_input.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/refusal.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/cli/simulate.hpp"
#include "api/crypto.hpp"
#include "api/http/json_output.hpp"
#include "api/http/request_framing.hpp"
#include "api/log.hpp"
#include "api/query/platform_protocol.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/base/clock.hpp"
#include "ledger/read/reads.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;
using projections::EventType;
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

constexpr std::int64_t kSimulatorMicrosPerSecond = 1'000'000;
constexpr auto kSimulatorAsTuple = net::as_tuple(net::use_awaitable);
constexpr std::string_view kV3Prefix = "/v3/pay/transactions/out-trade-no/";
constexpr int kSimulatorThreads = 4;

// What the platform's record says of an order.
struct PlatformRecord {
    bool exists = false;
    projections::OrderRow order{};
    std::optional<projections::Event> payment{};
};

PlatformRecord ReadRecord(ledger::ConnectionPool& reads, const std::string& out_trade_no) {
    PlatformRecord record;
    if (!projections::IsValidKey(out_trade_no)) return record;
    ledger::ConnectionPool::Lease connection = reads.Acquire();
    pqxx::read_transaction tx{*connection};
    std::optional<ledger::OrderView> view = ledger::ReadOrderView(tx, out_trade_no);
    if (!view) return record;
    record.exists = true;
    record.order = std::move(view->order);
    for (projections::Event& event : ledger::ReadOrderEvents(tx, out_trade_no)) {
        if (event.event_type == EventType::kPaymentSucceeded) record.payment = std::move(event);
    }
    return record;
}

bool Paid(const PlatformRecord& record) { return record.exists && record.payment.has_value(); }

// Appends `event` to the platform's record, its receipt `body`, and waits for the outcome.
ledger::DeliveryResult Record(ledger::Committer& committer, projections::Event event,
                              std::string body) {
    ledger::Delivery delivery;
    delivery.receipt.source = event.source;
    delivery.receipt.received_at = ledger::NowMicros();
    delivery.receipt.peer = "simulate-platform";
    delivery.receipt.body = std::move(body);
    delivery.receipt.out_trade_no = event.out_trade_no;
    delivery.receipt.signature_verified = true;
    delivery.event = std::move(event);
    std::promise<ledger::DeliveryResult> decided;
    std::future<ledger::DeliveryResult> result = decided.get_future();
    committer.Submit(std::move(delivery), [&decided](ledger::DeliveryResult done) {
        decided.set_value(std::move(done));
    });
    return result.get();
}

bool Taken(const ledger::DeliveryResult& result) {
    return result.outcome == projections::Outcome::kAppended ||
           result.outcome == projections::Outcome::kDuplicate;
}

// Appends the close the platform made to its record; false when its ledger refused it.
bool RecordClose(ledger::Committer& committer, QueryChannel channel,
                 const std::string& out_trade_no, const std::string& request_body) {
    return Taken(Record(committer,
                        projections::Event{.out_trade_no = out_trade_no,
                                           .event_type = EventType::kPaymentClosed,
                                           .source = SourceOf(channel, QueryAction::kClose),
                                           .occurred_at = ledger::NowMicros()},
                        request_body));
}

std::string NonceText() {
    std::string nonce = RandomHex(16);
    for (char& c : nonce) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return nonce;
}

Response Text(http::status status, std::string content_type, std::string body) {
    return MakeResponse(status, std::move(content_type), std::move(body));
}

// ---- WeChat Pay v3 -----------------------------------------------------------------------

// `Authorization: WECHATPAY2-SHA256-RSA2048 k="v",…` as a map; empty when not that scheme.
std::map<std::string, std::string> AuthorizationFields(std::string_view header) {
    std::map<std::string, std::string> fields;
    constexpr std::string_view kScheme = "WECHATPAY2-SHA256-RSA2048 ";
    if (!header.starts_with(kScheme)) return fields;
    std::string_view rest = header.substr(kScheme.size());
    while (!rest.empty()) {
        const std::size_t equals = rest.find('=');
        if (equals == std::string_view::npos || equals + 1 >= rest.size() ||
            rest[equals + 1] != '"') {
            return {};
        }
        const std::size_t close = rest.find('"', equals + 2);
        if (close == std::string_view::npos) return {};
        fields[std::string(rest.substr(0, equals))] =
            std::string(rest.substr(equals + 2, close - equals - 2));
        rest = rest.substr(close + 1);
        if (!rest.empty() && rest.front() == ',') rest.remove_prefix(1);
    }
    return fields;
}

}  // namespace

PlatformSimulator::PlatformSimulator(const Config& config, ledger::ConnectionPool& reads,
                                     ledger::Committer& committer)
    : config_(config), reads_(reads), committer_(committer) {}

Response PlatformSimulator::Answer(const Request& request) {
    const std::string_view target = request.target();
    if (target == "/simulate/pay" && request.method() == http::verb::post) return Pay(request);
    if (target.starts_with(kV3Prefix)) return WechatV3(request);
    if (target.starts_with("/pay/orderquery") || target.starts_with("/pay/closeorder")) {
        return WechatV2(request);
    }
    if (request.method() == http::verb::post) return Alipay(request);
    return Text(http::status::not_found, "text/plain", "no such API");
}

Response PlatformSimulator::WechatV3(const Request& request) {
    if (!config_.wechat_v3 || !config_.wechat_v3->query ||
        !config_.wechat_v3->simulate_private_key) {
        return Text(http::status::not_found, "text/plain", "no wechat_v3 query section");
    }
    const WechatV3Config& v3 = *config_.wechat_v3;
    // The platform's answer, signed with its key (the simulate_* key pair's private half).
    const auto answer = [&](http::status status, const std::string& body) {
        Response response =
            body.empty() ? Response{status, 11} : MakeResponse(status, "application/json", body);
        const std::string timestamp =
            std::to_string(ledger::NowMicros() / kSimulatorMicrosPerSecond);
        const std::string nonce = NonceText();
        response.set("Wechatpay-Timestamp", timestamp);
        response.set("Wechatpay-Nonce", nonce);
        response.set("Wechatpay-Serial", v3.simulate_serial);
        response.set("Wechatpay-Signature", ledger::Base64Encode(RsaSha256Sign(
                                                *v3.simulate_private_key,
                                                WechatV3SignatureMessage(timestamp, nonce, body))));
        response.set("Request-ID", "sim-" + NonceText());
        return response;
    };
    const auto error = [&](http::status status, const char* code, const char* message) {
        return answer(status, Dump(json{{"code", code}, {"message", message}}));
    };
    // The request's signature, with the public half of the merchant's key.
    const std::string method = request.method() == http::verb::get ? "GET" : "POST";
    const std::string target(request.target());
    const auto authorization = request.find(http::field::authorization);
    const std::map<std::string, std::string> fields = AuthorizationFields(
        authorization == request.end() ? std::string_view{}
                                       : std::string_view(authorization->value()));
    const auto field = [&](const char* name) {
        const auto it = fields.find(name);
        return it == fields.end() ? std::string{} : it->second;
    };
    const std::optional<std::int64_t> timestamp =
        projections::ParseDigits(field("timestamp"), INT64_MAX);
    const std::optional<std::string> signature = ledger::Base64Decode(field("signature"));
    const std::int64_t now = ledger::NowMicros() / kSimulatorMicrosPerSecond;
    if (field("mchid") != v3.mchid || field("serial_no") != v3.query->merchant_serial ||
        !timestamp || *timestamp > now + 300 || *timestamp < now - 300 || !signature ||
        !RsaSha256Verify(
            v3.query->merchant_private_key.Public(),
            WechatV3RequestMessage(method, target, *timestamp, field("nonce_str"), request.body()),
            *signature)) {
        return error(http::status::unauthorized, "SIGN_ERROR", "签名错误");
    }
    std::string_view rest = std::string_view(target).substr(kV3Prefix.size());
    const bool close = method == "POST";
    std::string out_trade_no;
    if (close) {
        if (!rest.ends_with("/close")) return error(http::status::not_found, "NOT_FOUND", "no API");
        out_trade_no = std::string(rest.substr(0, rest.size() - 6));
    } else {
        const std::size_t question = rest.find('?');
        out_trade_no = std::string(rest.substr(0, question));
        if (question == std::string_view::npos ||
            rest.substr(question + 1) != "mchid=" + PathEscape(v3.mchid)) {
            return error(http::status::bad_request, "PARAM_ERROR", "mchid is required");
        }
    }
    // The simulator's numbers need no unescaping but WeChat's own alphabet ('*' as %2A).
    for (std::size_t at; (at = out_trade_no.find("%2A")) != std::string::npos;) {
        out_trade_no.replace(at, 3, "*");
    }
    const PlatformRecord record = ReadRecord(reads_, out_trade_no);
    if (close) {
        if (Paid(record)) return error(http::status::bad_request, "ORDER_PAID", "订单已支付");
        if (record.exists && record.order.status == "WAIT_PAY" &&
            !RecordClose(committer_, QueryChannel::kWechatV3, out_trade_no, request.body())) {
            return error(http::status::internal_server_error, "SYSTEM_ERROR", "系统错误");
        }
        return answer(http::status::no_content, "");
    }
    if (!record.exists) return error(http::status::not_found, "ORDER_NOT_EXIST", "订单不存在");
    json transaction = {{"appid", v3.appid},
                        {"mchid", v3.mchid},
                        {"out_trade_no", out_trade_no},
                        {"trade_type", "NATIVE"},
                        {"attach", ""}};
    if (record.payment) {
        const projections::Event& paid = *record.payment;
        transaction["trade_state"] = record.order.refunded_amount > 0 ? "REFUND" : "SUCCESS";
        transaction["trade_state_desc"] = "支付成功";
        transaction["transaction_id"] = paid.transaction_id.value_or("");
        transaction["bank_type"] = "OTHERS";
        transaction["success_time"] = projections::FormatShanghaiRfc3339(paid.occurred_at);
        transaction["payer"] = {{"openid", "oSimulatedPayer"}};
        transaction["amount"] = {{"total", paid.amount},
                                 {"payer_total", paid.amount},
                                 {"currency", paid.currency},
                                 {"payer_currency", paid.currency}};
    } else if (record.order.status == "CLOSED") {
        transaction["trade_state"] = "CLOSED";
        transaction["trade_state_desc"] = "订单已关闭";
        transaction["amount"] = {{"total", record.order.amount},
                                 {"currency", record.order.currency}};
    } else {
        transaction["trade_state"] = "NOTPAY";
        transaction["trade_state_desc"] = "订单未支付";
        transaction["amount"] = {{"total", record.order.amount},
                                 {"currency", record.order.currency}};
    }
    return answer(http::status::ok, Dump(transaction));
}

Response PlatformSimulator::WechatV2(const Request& request) {
    if (!config_.wechat_v2) {
        return Text(http::status::not_found, "text/plain", "no wechat_v2 section");
    }
    const WechatV2Config& v2 = *config_.wechat_v2;
    const auto answer = [&](PlatformFields fields) {
        fields["return_code"] = "SUCCESS";
        fields["return_msg"] = "OK";
        fields["appid"] = v2.appid;
        fields["mch_id"] = v2.mch_id;
        fields["nonce_str"] = NonceText();
        if (v2.sign_type != WechatV2SignType::kMd5) {
            fields["sign_type"] = std::string(ToString(v2.sign_type));
        }
        fields["sign"] = WechatV2Sign(fields, v2.api_key, v2.sign_type);
        return Text(http::status::ok, "text/xml", WechatV2Xml(fields, "xml"));
    };
    const Checked<PlatformFields> parsed = ParseFlatXml(request.body(), "xml");
    if (!parsed) {
        return Text(http::status::ok, "text/xml",
                    WechatV2Xml({{"return_code", "FAIL"}, {"return_msg", "XML格式错误"}}, "xml"));
    }
    const PlatformFields& fields = *parsed;
    if (!ConstantTimeEquals(WechatV2Sign(fields, v2.api_key, v2.sign_type),
                            FieldOr(fields, "sign")) ||
        FieldOr(fields, "appid") != v2.appid || FieldOr(fields, "mch_id") != v2.mch_id) {
        return Text(http::status::ok, "text/xml",
                    WechatV2Xml({{"return_code", "FAIL"}, {"return_msg", "签名错误"}}, "xml"));
    }
    const std::string out_trade_no(FieldOr(fields, "out_trade_no"));
    const PlatformRecord record = ReadRecord(reads_, out_trade_no);
    const bool close = std::string_view(request.target()).starts_with("/pay/closeorder");
    if (close) {
        if (Paid(record)) return answer({{"result_code", "FAIL"}, {"err_code", "ORDERPAID"}});
        if (record.exists && record.order.status == "CLOSED") {
            return answer({{"result_code", "FAIL"}, {"err_code", "ORDERCLOSED"}});
        }
        if (record.exists &&
            !RecordClose(committer_, QueryChannel::kWechatV2, out_trade_no, request.body())) {
            return answer({{"result_code", "FAIL"}, {"err_code", "SYSTEMERROR"}});
        }
        return answer({{"result_code", "SUCCESS"}});
    }
    if (!record.exists) {
        return answer({{"result_code", "FAIL"},
                       {"err_code", "ORDERNOTEXIST"},
                       {"err_code_des", "此交易订单号不存在"}});
    }
    PlatformFields out{
        {"result_code", "SUCCESS"}, {"out_trade_no", out_trade_no}, {"trade_type", "NATIVE"}};
    if (record.payment) {
        const projections::Event& paid = *record.payment;
        out["trade_state"] = record.order.refunded_amount > 0 ? "REFUND" : "SUCCESS";
        out["transaction_id"] = paid.transaction_id.value_or("");
        out["total_fee"] = std::to_string(paid.amount);
        out["cash_fee"] = std::to_string(paid.amount);
        out["fee_type"] = paid.currency;
        out["time_end"] = projections::FormatShanghaiCompact(paid.occurred_at);
        out["bank_type"] = "OTHERS";
    } else {
        out["trade_state"] = record.order.status == "CLOSED" ? "CLOSED" : "NOTPAY";
        out["total_fee"] = std::to_string(record.order.amount);
    }
    return answer(std::move(out));
}

Response PlatformSimulator::Alipay(const Request& request) {
    if (!config_.alipay || !config_.alipay->query || !config_.alipay->simulate_private_key) {
        return Text(http::status::not_found, "text/plain", "no alipay query section");
    }
    const AlipayConfig& alipay = *config_.alipay;
    const Checked<PlatformFields> form = DecodeForm(request.body());
    const std::string method = form ? std::string(FieldOr(*form, "method")) : std::string{};
    const bool close = method == "alipay.trade.close";
    const std::string member =
        close ? "alipay_trade_close_response" : "alipay_trade_query_response";
    // The answer: {"<member>":{…},"sign":"<RSA2 over that member's exact text>"}.
    const auto answer = [&](const json& response) {
        const std::string text = Dump(response);
        const std::string sign =
            ledger::Base64Encode(RsaSha256Sign(*alipay.simulate_private_key, text));
        return Text(http::status::ok, "application/json;charset=utf-8",
                    "{\"" + member + "\":" + text + ",\"sign\":" + Dump(json(sign)) + "}");
    };
    const auto business_failure = [&](const char* sub_code, const char* sub_msg) {
        return answer(json{{"code", "40004"},
                           {"msg", "Business Failed"},
                           {"sub_code", sub_code},
                           {"sub_msg", sub_msg}});
    };
    const std::optional<std::string> sign =
        form ? ledger::Base64Decode(FieldOr(*form, "sign")) : std::nullopt;
    if (!form || (method != "alipay.trade.query" && !close) ||
        FieldOr(*form, "app_id") != alipay.app_id || !sign ||
        !RsaSha256Verify(alipay.query->app_private_key.Public(), AlipayRequestSignContent(*form),
                         *sign)) {
        return Text(http::status::ok, "application/json;charset=utf-8",
                    Dump(json{{"error_response",
                               {{"code", "40002"},
                                {"msg", "Invalid Arguments"},
                                {"sub_code", "isv.invalid-signature"}}}}));
    }
    const std::optional<json> biz = ParseJsonObject(FieldOr(*form, "biz_content"));
    const std::string out_trade_no = biz ? StringMember(*biz, "out_trade_no").value_or("") : "";
    const PlatformRecord record = ReadRecord(reads_, out_trade_no);
    if (close) {
        if (Paid(record)) return business_failure("ACQ.TRADE_STATUS_ERROR", "交易状态不合法");
        if (!record.exists) return business_failure("ACQ.TRADE_NOT_EXIST", "交易不存在");
        if (record.order.status == "WAIT_PAY" &&
            !RecordClose(committer_, QueryChannel::kAlipay, out_trade_no, request.body())) {
            return business_failure("ACQ.SYSTEM_ERROR", "系统错误");
        }
        return answer(json{{"code", "10000"}, {"msg", "Success"}, {"out_trade_no", out_trade_no}});
    }
    if (!record.exists) return business_failure("ACQ.TRADE_NOT_EXIST", "交易不存在");
    json response = {{"code", "10000"}, {"msg", "Success"}, {"out_trade_no", out_trade_no}};
    if (record.payment) {
        const projections::Event& paid = *record.payment;
        response["trade_no"] = paid.transaction_id.value_or("");
        response["trade_status"] = record.order.refunded_amount >= record.order.paid_amount &&
                                           record.order.refunded_amount > 0
                                       ? "TRADE_CLOSED"
                                       : "TRADE_SUCCESS";
        response["total_amount"] = projections::FormatMajorUnits(paid.amount);
        response["buyer_logon_id"] = "sim***@example.com";
        response["send_pay_date"] = projections::FormatShanghaiDashed(paid.occurred_at);
    } else {
        response["trade_status"] =
            record.order.status == "CLOSED" ? "TRADE_CLOSED" : "WAIT_BUYER_PAY";
        response["total_amount"] = projections::FormatMajorUnits(record.order.amount);
    }
    return answer(response);
}

namespace {

net::awaitable<void> ServeSimulatorConnection(tcp::socket socket, PlatformSimulator& simulator) {
    beast::tcp_stream stream{std::move(socket)};
    beast::flat_buffer buffer{kReadBufferBytesMax};
    for (;;) {
        ChunkFramingBudget framing;
        RequestParser parser;
        framing.Apply(parser);
        stream.expires_after(std::chrono::seconds{15});
        const auto [read_error, read_bytes] =
            co_await http::async_read(stream, buffer, parser, kSimulatorAsTuple);
        if (read_error) co_return;
        Request request = parser.release();
        Response response;
        try {
            response = simulator.Answer(request);
        } catch (const std::exception& error) {
            LogJson("error",
                    Dump(json{{"msg", "simulate-platform failed"}, {"error", error.what()}}));
            response = MakeResponse(http::status::internal_server_error, "text/plain", "error");
        }
        response.version(request.version());
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        const auto [write_error, written] =
            co_await http::async_write(stream, response, kSimulatorAsTuple);
        if (write_error || !request.keep_alive()) co_return;
    }
}

net::awaitable<void> AcceptSimulatorConnections(tcp::acceptor& acceptor,
                                                PlatformSimulator& simulator) {
    for (;;) {
        auto [error, socket] = co_await acceptor.async_accept(kSimulatorAsTuple);
        if (error) co_return;
        net::co_spawn(acceptor.get_executor(),
                      ServeSimulatorConnection(std::move(socket), simulator), net::detached);
    }
}

}  // namespace

CLI::App* AddSimulatePlatformCommand(CLI::App& cli, SimulatePlatformCommand& command) {
    CLI::App* simulate = cli.add_subcommand(
        "simulate-platform",
        "serve the platforms' order query and close APIs from a ledger standing for their record");
    simulate->add_option("--listen", command.listen, "host:port (default 127.0.0.1:9090)");
    return simulate;
}

// A payment the platform took and never told the merchant of: the order registered in the
// platform's record if it is not, then paid there (docs/query.md#by-hand-and-for-development).
Response PlatformSimulator::Pay(const Request& request) {
    const auto refuse = [](std::string message) {
        return Text(http::status::bad_request, "application/json",
                    Dump(json{{"error", std::move(message)}}));
    };
    const std::optional<json> body = ParseJsonObject(request.body());
    if (!body) return refuse("body is not a JSON object");
    const std::optional<QueryChannel> channel =
        ParseQueryChannel(StringMember(*body, "channel").value_or(""));
    if (!channel) return refuse("channel must be wechat_v2, wechat_v3 or alipay");
    const std::string out_trade_no = StringMember(*body, "out_trade_no").value_or("");
    if (!projections::IsValidKey(out_trade_no)) {
        return refuse(std::string("out_trade_no: ") + projections::kKeyRuleText);
    }
    const Checked<std::int64_t> amount = RequireJsonAmount(*body, "amount");
    if (!amount) return refuse(amount.refusal().message);
    const std::string currency = StringMember(*body, "currency").value_or("CNY");
    if (!RequireCurrency(currency, "currency")) return refuse("currency must be an ISO 4217 code");
    const std::string transaction_id =
        StringMember(*body, "transaction_id")
            .value_or(SimulatedPaymentNumber(ToString(*channel), out_trade_no));
    if (!projections::IsValidKey(transaction_id)) {
        return refuse(std::string("transaction_id: ") + projections::kKeyRuleText);
    }
    const ledger::DeliveryResult registered =
        Record(committer_,
               projections::Event{.out_trade_no = out_trade_no,
                                  .event_type = EventType::kOrderCreated,
                                  .source = projections::Source::kApi,
                                  .account_id = "platform",
                                  .amount = *amount,
                                  .currency = currency,
                                  .occurred_at = ledger::NowMicros(),
                                  .data = "{}"},
               request.body());
    const ledger::DeliveryResult paid =
        Record(committer_,
               projections::Event{.out_trade_no = out_trade_no,
                                  .event_type = EventType::kPaymentSucceeded,
                                  .source = *projections::ParseSource(ToString(*channel)),
                                  .amount = *amount,
                                  .currency = currency,
                                  .transaction_id = transaction_id,
                                  .occurred_at = ledger::NowMicros(),
                                  .data = "{}"},
               request.body());
    if (!Taken(registered) || !Taken(paid)) {
        const ledger::DeliveryResult& failed = Taken(registered) ? paid : registered;
        return Text(
            http::status::conflict, "application/json",
            Dump(json{{"error", "the platform's record refused it: " +
                                    std::string(projections::ToString(failed.outcome)) +
                                    (failed.message.empty() ? "" : ": " + failed.message)}}));
    }
    return Text(http::status::ok, "application/json",
                Dump(json{{"out_trade_no", out_trade_no},
                          {"transaction_id", transaction_id},
                          {"outcome", projections::ToString(paid.outcome)}}));
}

int RunSimulatePlatformCommand(const Config& config, const SimulatePlatformCommand& command) {
    const std::size_t colon = command.listen.rfind(':');
    boost::system::error_code bad_address;
    const net::ip::address address =
        net::ip::make_address(command.listen.substr(0, colon), bad_address);
    const std::optional<std::int64_t> port =
        colon == std::string::npos
            ? std::nullopt
            : projections::ParseDigits(command.listen.substr(colon + 1), 65535);
    if (bad_address || !port) {
        std::cerr << "payledger: simulate-platform: --listen must be address:port\n";
        return 2;
    }
    ledger::ConnectionPool reads{config.database_url, kSimulatorThreads, std::chrono::seconds{5}};
    ledger::Committer committer{{.url = config.database_url, .cache_orders_max = 0}};
    PlatformSimulator simulator{config, reads, committer};
    net::io_context io{kSimulatorThreads};
    tcp::acceptor acceptor{io};
    const tcp::endpoint endpoint{address, static_cast<unsigned short>(*port)};
    acceptor.open(endpoint.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
    net::signal_set signals{io, SIGINT, SIGTERM};
    signals.async_wait([&](const boost::system::error_code&, int) {
        boost::system::error_code ignored;
        acceptor.close(ignored);
        io.stop();
    });
    net::co_spawn(io, AcceptSimulatorConnections(acceptor, simulator), net::detached);
    LogJson("info", Dump(json{{"msg", "simulate-platform listening"},
                              {"address", address.to_string() + ":" +
                                              std::to_string(acceptor.local_endpoint().port())}}));
    // The handler reads and writes the platform's record synchronously: a few threads, so that
    // several askers are answered at once (each connection's requests one after another).
    std::vector<std::thread> threads;
    for (int i = 0; i < kSimulatorThreads; ++i) threads.emplace_back([&io] { io.run(); });
    for (std::thread& thread : threads) thread.join();
    committer.Stop();
    return 0;
}

}  // namespace payledger::api
