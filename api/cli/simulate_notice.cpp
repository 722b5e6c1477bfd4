// The notices of `payledger simulate`, shaped like the platforms' own (docs/platforms.md).
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "api/channels/alipay_form.hpp"
#include "api/channels/generic_channel.hpp"
#include "api/channels/platform_crypto.hpp"
#include "api/channels/wechat_v2_xml.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "api/cli/simulate.hpp"
#include "api/http/json_output.hpp"
#include "ledger/base/bytes.hpp"
#include "ledger/base/clock.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

constexpr std::int64_t kMicrosPerSecond = 1'000'000;
constexpr std::size_t kPlatformNumberDigits = 28;  // As WeChat's transaction_id.

std::string ShanghaiDashed(std::int64_t unix_seconds) {
    return projections::FormatShanghaiDashed(unix_seconds * kMicrosPerSecond);
}

std::string ShanghaiCompact(std::int64_t unix_seconds) {
    return projections::FormatShanghaiCompact(unix_seconds * kMicrosPerSecond);
}

std::string ShanghaiRfc3339(std::int64_t unix_seconds) {
    return projections::FormatShanghaiRfc3339(unix_seconds * kMicrosPerSecond);
}

std::string Yuan(std::int64_t fen) { return projections::FormatMajorUnits(fen); }

// A platform-looking number: `prefix`, then digits derived from `seed` (deterministic).
std::string PlatformNumber(const std::string& prefix, const std::string& seed) {
    std::string number = prefix;
    for (const char c : ledger::Sha256Hex(seed)) {
        if (number.size() == kPlatformNumberDigits) break;
        number += static_cast<char>('0' + (c >= 'a' ? c - 'a' + 10 : c - '0') % 10);
    }
    return number;
}

bool IsRefund(const SimulateOptions& options) { return options.kind == "refund"; }

// The order total a notice names: a refund's order_amount when given, else the amount.
std::int64_t OrderTotal(const SimulateOptions& options) {
    return IsRefund(options) && options.order_amount > 0 ? options.order_amount : options.amount;
}

std::string NumberFor(const SimulateOptions& options, const char* payment_prefix,
                      const char* refund_prefix) {
    if (!options.transaction_id.empty()) return options.transaction_id;
    return IsRefund(options) ? PlatformNumber(refund_prefix, "refund:" + options.out_trade_no)
                             : PlatformNumber(payment_prefix, "payment:" + options.out_trade_no);
}

template <typename Section>
const Section& Require(const std::optional<Section>& section, const char* name) {
    if (!section) throw ConfigError(std::string(name) + ": missing; simulate needs it");
    return *section;
}

SimulatedNotice WechatV2(const Config& config, const SimulateOptions& options) {
    const WechatV2Config& v2 = Require(config.wechat_v2, "wechat_v2");
    PlatformFields fields{{"appid", v2.appid},
                          {"mch_id", v2.mch_id},
                          {"nonce_str", RandomHex(16)},
                          {"return_code", "SUCCESS"}};
    const std::string number = NumberFor(options, "4200", "5030");
    if (IsRefund(options)) {
        // The refund is AES-256-ECB under the MD5 of the API key
        // (docs/platforms.md#apiv2-refund-notices).
        const PlatformFields refund{
            {"out_trade_no", options.out_trade_no},
            {"out_refund_no", "R" + options.out_trade_no},
            {"refund_id", number},
            {"transaction_id", PlatformNumber("4200", "payment:" + options.out_trade_no)},
            {"total_fee", std::to_string(OrderTotal(options))},
            {"refund_fee", std::to_string(options.amount)},
            {"settlement_refund_fee", std::to_string(options.amount)},
            {"refund_status", "SUCCESS"},
            {"success_time", ShanghaiDashed(options.unix_seconds)},
            {"refund_recv_accout", "支付用户的零钱"},
            {"refund_account", "REFUND_SOURCE_RECHARGE_FUNDS"},
            {"refund_request_source", "API"}};
        fields["req_info"] = ledger::Base64Encode(
            Aes256EcbEncrypt(Md5HexLower(v2.api_key), WechatV2Xml(refund, "root")));
    } else {
        fields.insert({{"result_code", "SUCCESS"},
                       {"out_trade_no", options.out_trade_no},
                       {"transaction_id", number},
                       {"total_fee", std::to_string(options.amount)},
                       {"cash_fee", std::to_string(options.amount)},
                       {"fee_type", options.currency},
                       {"time_end", ShanghaiCompact(options.unix_seconds)},
                       {"trade_type", "JSAPI"},
                       {"bank_type", "OTHERS"},
                       {"openid", "oSimulatedOpenId000001"},
                       {"is_subscribe", "N"}});
        if (v2.sign_type == WechatV2SignType::kHmacSha256) fields["sign_type"] = "HMAC-SHA256";
        fields["sign"] = WechatV2Sign(fields, v2.api_key, v2.sign_type);
    }
    return {.target = "/v1/callbacks/wechat/v2",
            .headers = {{"Content-Type", "text/xml"}},
            .body = WechatV2Xml(fields, "xml")};
}

json WechatV3Resource(const WechatV3Config& v3, const SimulateOptions& options) {
    const std::string number = NumberFor(options, "4200", "5030");
    const std::string success_time = ShanghaiRfc3339(options.unix_seconds);
    if (IsRefund(options)) {
        return {{"mchid", v3.mchid},
                {"out_trade_no", options.out_trade_no},
                {"transaction_id", PlatformNumber("4200", "payment:" + options.out_trade_no)},
                {"out_refund_no", "R" + options.out_trade_no},
                {"refund_id", number},
                {"refund_status", "SUCCESS"},
                {"success_time", success_time},
                {"user_received_account", "支付用户零钱"},
                {"amount",
                 {{"total", OrderTotal(options)},
                  {"refund", options.amount},
                  {"payer_total", OrderTotal(options)},
                  {"payer_refund", options.amount}}}};
    }
    return {{"mchid", v3.mchid},
            {"appid", v3.appid},
            {"out_trade_no", options.out_trade_no},
            {"transaction_id", number},
            {"trade_type", "JSAPI"},
            {"trade_state", "SUCCESS"},
            {"trade_state_desc", "支付成功"},
            {"bank_type", "OTHERS"},
            {"attach", ""},
            {"success_time", success_time},
            {"payer", {{"openid", "oSimulatedOpenId000001"}}},
            {"amount",
             {{"total", options.amount},
              {"payer_total", options.amount},
              {"currency", options.currency},
              {"payer_currency", options.currency}}}};
}

SimulatedNotice WechatV3(const Config& config, const SimulateOptions& options) {
    const WechatV3Config& v3 = Require(config.wechat_v3, "wechat_v3");
    if (!v3.simulate_private_key) {
        throw ConfigError("wechat_v3.simulate_private_key: missing; simulate needs it");
    }
    const bool refund = IsRefund(options);
    const std::string aad = refund ? "refund" : "transaction";
    const std::string nonce = RandomHex(6);  // 12 characters, as WeChat's nonces.
    const std::string sealed =
        Aes256GcmEncrypt(v3.api_v3_key, nonce, aad, Dump(WechatV3Resource(v3, options)));
    const std::string id = RandomHex(4) + "-" + RandomHex(2) + "-" + RandomHex(2) + "-" +
                           RandomHex(2) + "-" + RandomHex(6);
    const json envelope = {{"id", id},
                           {"create_time", ShanghaiRfc3339(options.unix_seconds)},
                           {"resource_type", "encrypt-resource"},
                           {"event_type", refund ? "REFUND.SUCCESS" : "TRANSACTION.SUCCESS"},
                           {"summary", refund ? "退款成功" : "支付成功"},
                           {"resource",
                            {{"original_type", aad},
                             {"algorithm", "AEAD_AES_256_GCM"},
                             {"ciphertext", ledger::Base64Encode(sealed)},
                             {"associated_data", aad},
                             {"nonce", nonce}}}};
    SimulatedNotice notice{.target = "/v1/callbacks/wechat/v3", .body = Dump(envelope)};
    const std::string timestamp = std::to_string(options.unix_seconds);
    const std::string header_nonce = RandomHex(16);
    const std::string signature = RsaSha256Sign(
        *v3.simulate_private_key, WechatV3SignatureMessage(timestamp, header_nonce, notice.body));
    notice.headers = {{"Content-Type", "application/json"},
                      {"Wechatpay-Serial", v3.simulate_serial},
                      {"Wechatpay-Timestamp", timestamp},
                      {"Wechatpay-Nonce", header_nonce},
                      {"Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048"},
                      {"Wechatpay-Signature", ledger::Base64Encode(signature)}};
    return notice;
}

SimulatedNotice Alipay(const Config& config, const SimulateOptions& options) {
    const AlipayConfig& alipay = Require(config.alipay, "alipay");
    if (!alipay.simulate_private_key) {
        throw ConfigError("alipay.simulate_private_key: missing; simulate needs it");
    }
    const std::string trade_no = SimulatedPaymentNumber("alipay", options.out_trade_no);
    const std::string now = ShanghaiDashed(options.unix_seconds);
    PlatformFields fields{{"app_id", alipay.app_id},
                          {"auth_app_id", alipay.app_id},
                          {"charset", "utf-8"},
                          {"version", "1.0"},
                          {"notify_type", "trade_status_sync"},
                          {"notify_id", RandomHex(16)},
                          {"notify_time", now},
                          {"out_trade_no", options.out_trade_no},
                          {"trade_no", options.kind == "payment" && !options.transaction_id.empty()
                                           ? options.transaction_id
                                           : trade_no},
                          {"subject", "payledger 模拟订单"},
                          {"buyer_id", "2088102177846875"},
                          {"buyer_logon_id", "sim***@example.com"},
                          {"seller_id", alipay.seller_id.empty() ? std::string("2088102176044281")
                                                                 : alipay.seller_id},
                          {"total_amount", Yuan(OrderTotal(options))},
                          {"gmt_create", now}};
    if (options.kind == "payment") {
        fields.insert({{"trade_status", "TRADE_SUCCESS"},
                       {"gmt_payment", now},
                       {"receipt_amount", Yuan(options.amount)},
                       {"buyer_pay_amount", Yuan(options.amount)},
                       {"fund_bill_list", "[{\"amount\":\"" + Yuan(options.amount) +
                                              "\",\"fundChannel\":\"ALIPAYACCOUNT\"}]"}});
    } else if (IsRefund(options)) {  // A partial refund: TRADE_SUCCESS with refund_fee.
        fields.insert({{"trade_status", "TRADE_SUCCESS"},
                       {"gmt_payment", now},
                       {"gmt_refund", now + ".000"},
                       {"refund_fee", Yuan(options.amount)},
                       {"out_biz_no", NumberFor(options, "", "R")}});
    } else {
        fields.insert({{"trade_status", "TRADE_CLOSED"}, {"gmt_close", now}});
    }
    fields["sign_type"] = "RSA2";
    fields["sign"] = ledger::Base64Encode(
        RsaSha256Sign(*alipay.simulate_private_key, AlipaySignContent(fields)));
    return {.target = "/v1/callbacks/alipay",
            .headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}},
            .body = EncodeForm(fields)};
}

SimulatedNotice Generic(const Config& config, const SimulateOptions& options) {
    const GenericConfig& generic = Require(config.generic, "generic");
    json body = {
        {"out_trade_no", options.out_trade_no},
        {"occurred_at", projections::FormatRfc3339(options.unix_seconds * kMicrosPerSecond)}};
    if (options.kind == "close") {
        body["event_type"] = "PAYMENT_CLOSED";
    } else {
        body["event_type"] = IsRefund(options) ? "REFUND_SUCCEEDED" : "PAYMENT_SUCCEEDED";
        body["transaction_id"] = NumberFor(options, "GW", "GWR");
        body["amount"] = options.amount;
        body["currency"] = options.currency;
    }
    SimulatedNotice notice{.target = "/v1/callbacks/generic", .body = Dump(body)};
    notice.headers = {{"Content-Type", "application/json"},
                      {"Payledger-Signature",
                       GenericChannel::Sign(generic.secret, options.unix_seconds, notice.body)}};
    return notice;
}

}  // namespace

std::string SimulatedPaymentNumber(std::string_view channel, const std::string& out_trade_no) {
    return PlatformNumber(channel == "alipay" ? "2024" : "4200", "payment:" + out_trade_no);
}

SimulatedNotice BuildNotice(const Config& config, const SimulateOptions& input) {
    SimulateOptions options = input;
    if (options.unix_seconds == 0) {
        options.unix_seconds = ledger::NowMicros() / kMicrosPerSecond;
    }
    if (!projections::IsValidKey(options.out_trade_no)) {
        throw std::invalid_argument(std::string("--out-trade-no: must be ") +
                                    projections::kKeyRuleText);
    }
    if (!projections::IsValidAmount(options.amount)) {
        throw std::invalid_argument("--amount: must be minor units, 1 to 10^13");
    }
    if (options.kind != "payment" && options.kind != "refund" && options.kind != "close") {
        throw std::invalid_argument("--kind: must be payment, refund or close");
    }
    const bool closes = options.channel == "alipay" || options.channel == "generic";
    if (options.kind == "close" && !closes) {
        throw std::invalid_argument(options.channel + " sends no close notification");
    }
    if (options.channel == "wechat_v2") return WechatV2(config, options);
    if (options.channel == "wechat_v3") return WechatV3(config, options);
    if (options.channel == "alipay") return Alipay(config, options);
    if (options.channel == "generic") return Generic(config, options);
    throw std::invalid_argument("channel must be wechat_v2, wechat_v3, alipay or generic");
}

}  // namespace payledger::api
