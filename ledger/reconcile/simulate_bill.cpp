#include "ledger/reconcile/simulate_bill.hpp"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "ledger/pg/database.hpp"
#include "ledger/reconcile/alipay_bill.hpp"
#include "ledger/reconcile/bill_input.hpp"
#include "ledger/reconcile/reconciliation.hpp"
#include "projections/assert.hpp"

namespace payledger::ledger::reconcile {
namespace {

using projections::EventType;

// Where the statement's bytes go.
class Sink {
public:
    virtual ~Sink() = default;
    virtual void Write(std::string_view bytes) = 0;
    virtual void Close() = 0;
};

class StreamSink final : public Sink {
public:
    explicit StreamSink(std::ostream& out) : out_(out) {}
    void Write(std::string_view bytes) override {
        out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    void Close() override {
        out_.flush();
        if (!out_) throw BillError("cannot write the statement to stdout");
    }

private:
    std::ostream& out_;
};

class FileSink final : public Sink {
public:
    explicit FileSink(const std::string& path) : path_(path), out_(path, std::ios::binary) {
        if (!out_) throw BillError(path + ": cannot create: " + std::strerror(errno));
    }
    void Write(std::string_view bytes) override {
        out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    void Close() override {
        out_.close();
        if (!out_) throw BillError(path_ + ": cannot write");
    }

private:
    std::string path_;
    std::ofstream out_;
};

class GzipSink final : public Sink {
public:
    explicit GzipSink(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "wb")) {
        if (file_ == nullptr) throw BillError(path + ": cannot create: " + std::strerror(errno));
    }
    ~GzipSink() override {
        if (file_ != nullptr) gzclose(file_);
    }
    GzipSink(const GzipSink&) = delete;
    GzipSink& operator=(const GzipSink&) = delete;
    void Write(std::string_view bytes) override {
        if (bytes.empty()) return;
        if (gzwrite(file_, bytes.data(), static_cast<unsigned>(bytes.size())) == 0) {
            throw BillError(path_ + ": cannot write");
        }
    }
    void Close() override {
        const int status = gzclose(file_);
        file_ = nullptr;
        if (status != Z_OK) throw BillError(path_ + ": cannot write");
    }

private:
    std::string path_;
    gzFile file_;
};

bool EndsWith(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// One payment or refund of the day, as the statement needs it.
struct Row {
    EventType event_type = EventType::kPaymentSucceeded;
    std::string source{};
    std::string out_trade_no{};
    std::string transaction_id{};
    std::string payment_transaction_id{};  // A refund's payment, or its own id without one.
    std::int64_t amount = 0;
    std::string currency{};
    projections::TimeMicros occurred_at = 0;
};

// Fees in units of 0.00001 yuan (WeChat's 手续费): 0.6 % of a fen is 6 units.
std::string FormatFeeUnits(std::int64_t units) {
    const bool negative = units < 0;
    const std::int64_t magnitude = negative ? -units : units;
    std::string fraction = std::to_string(magnitude % 100'000);
    fraction.insert(0, 5 - fraction.size(), '0');
    return (negative ? "-" : "") + std::to_string(magnitude / 100'000) + "." + fraction;
}

std::string ChineseDate(projections::TimeMicros time) {
    const std::string dashed = FormatShanghaiDashed(time);  // 2026-11-30 10:06:33
    return dashed.substr(0, 4) + "年" + dashed.substr(5, 2) + "月" + dashed.substr(8, 2) + "日 " +
           dashed.substr(11);
}

class WechatWriter {
public:
    WechatWriter(Sink& sink, const SimulateBillOptions& options) : sink_(sink), options_(options) {
        sink_.Write(
            "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,"
            "交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,"
            "充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,"
            "申请退款金额,"
            "费率备注\n");
    }

    void Add(const Row& row) {
        const bool v3 = row.source == "wechat_v3" ||
                        (row.source == "wechat_bill" && options_.wechat_v2_mch_id.empty());
        const std::string& mch_id = v3 ? options_.wechat_v3_mch_id : options_.wechat_v2_mch_id;
        const std::string& appid = v3 ? options_.wechat_v3_appid : options_.wechat_v2_appid;
        if (mch_id.empty()) {
            throw BillError(std::string("a ") + row.source + " event needs " +
                            (v3 ? "wechat_v3.mchid" : "wechat_v2.mch_id") + " in the config");
        }
        const bool refund = row.event_type == EventType::kRefundSucceeded;
        const std::string amount = FormatYuan(row.amount);
        const std::int64_t fee = (refund ? -6 : 6) * row.amount;
        const std::vector<std::string> fields = {
            FormatShanghaiDashed(row.occurred_at),
            appid,
            mch_id,
            "0",
            "",
            refund ? row.payment_transaction_id : row.transaction_id,
            row.out_trade_no,
            "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o",
            "JSAPI",
            refund ? "REFUND" : "SUCCESS",
            "OTHERS",
            row.currency,
            refund ? "0.00" : amount,
            "0.00",
            refund ? row.transaction_id : "0",
            refund ? "RF-" + row.out_trade_no : "0",
            refund ? amount : "0.00",
            "0.00",
            refund ? "ORIGINAL" : "",
            refund ? "SUCCESS" : "",
            "payledger simulate-bill",
            "",
            FormatFeeUnits(fee),
            "0.60%",
            refund ? "0.00" : amount,
            refund ? amount : "0.00",
            ""};
        std::string line = "`";
        for (std::size_t i = 0; i < fields.size(); ++i) {
            if (i > 0) line += ",`";
            line += fields[i];
        }
        line += '\n';
        sink_.Write(line);
        ++rows_;
        (refund ? refund_total_ : order_total_) += row.amount;
        fee_total_ += fee;
    }

    void Finish() {
        sink_.Write(
            "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,"
            "申请退款总金额\n");
        sink_.Write("`" + std::to_string(rows_) + ",`" + FormatYuan(order_total_) + ",`" +
                    FormatYuan(refund_total_) + ",`0.00,`" + FormatFeeUnits(fee_total_) + ",`" +
                    FormatYuan(order_total_) + ",`" + FormatYuan(refund_total_) + "\n");
    }

private:
    Sink& sink_;
    const SimulateBillOptions& options_;
    std::int64_t rows_ = 0, order_total_ = 0, refund_total_ = 0, fee_total_ = 0;
};

class AlipayWriter {
public:
    AlipayWriter(Sink& sink, const SimulateBillOptions& options,
                 std::pair<projections::TimeMicros, projections::TimeMicros> day)
        : sink_(sink), day_(day) {
        Line("#支付宝业务明细查询");
        Line("#账号：[" + options.alipay_account + "]");
        Line("#起始日期：[" + ChineseDate(day.first) + "]   终止日期：[" + ChineseDate(day.second) +
             "]");
        Line(
            "#-----------------------------------------业务明细列表--------------------------"
            "--------------");
        Line(
            "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,"
            "终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
            "支付宝优惠（元）,"
            "商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,"
            "退款批次号/请求号,服务费（元）,分润（元）,备注");
    }

    void Add(const Row& row) {
        const bool refund = row.event_type == EventType::kRefundSucceeded;
        const std::string amount = (refund ? "-" : "") + FormatYuan(row.amount);
        const std::int64_t fee = (row.amount * 6 + 500) / 1000;
        const std::string time = FormatShanghaiDashed(row.occurred_at);
        // A refund recorded under the payment's own number has no request number of its own.
        const bool own_number = refund && row.transaction_id != row.payment_transaction_id;
        Line((refund ? row.payment_transaction_id : row.transaction_id) + "\t," + row.out_trade_no +
             "\t," + (refund ? "退款" : "交易") + "\t,payledger simulate-bill," + time + "," +
             time + ",\t,\t,\t,\t,*付(pay***@example.com)\t," + amount + "," + amount +
             ",0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00," + (own_number ? row.transaction_id : "") +
             "\t," + (refund ? "" : "-") + FormatYuan(fee) + ",0.00,");
        ++(refund ? refunds_ : payments_);
    }

    void Finish() {
        Line(
            "#-----------------------------------------业务明细列表结束------------------------"
            "------------");
        Line("#交易合计：" + std::to_string(payments_) + "笔，退款合计：" +
             std::to_string(refunds_) + "笔");
        Line("#导出时间：[" + ChineseDate(day_.second + 9 * 3600 * std::int64_t{1'000'000}) + "]");
    }

private:
    void Line(const std::string& utf8) {
        const std::optional<std::string> gbk = EncodeGbk(utf8);
        PAYLEDGER_ASSERT(gbk.has_value());  // Our own text: ASCII, keys and GBK's characters.
        sink_.Write(*gbk + "\r\n");
    }

    Sink& sink_;
    std::pair<projections::TimeMicros, projections::TimeMicros> day_;
    std::int64_t payments_ = 0, refunds_ = 0;
};

}  // namespace

void ZipAlipayBill(const std::string& zip_path, const std::string& csv_path,
                   const std::string& account, const std::string& date) {
    std::string day = date;
    day.erase(std::remove(day.begin(), day.end(), '-'), day.end());
    const std::optional<std::string> detail_name =
        EncodeGbk(account + "_" + day + std::string(kAlipayDetailSuffix));
    const std::optional<std::string> summary_name =
        EncodeGbk(account + "_" + day + "_业务明细(汇总).csv");
    const std::optional<std::string> summary = EncodeGbk("#支付宝业务汇总查询\r\n");
    PAYLEDGER_ASSERT(detail_name && summary_name && summary);
    int code = 0;
    zip_t* archive = zip_open(zip_path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
    if (archive == nullptr) throw BillError(zip_path + ": cannot create the zip archive");
    zip_error_t error;
    zip_error_init(&error);
    // A source belongs to the archive once zip_file_add took it; until then it is ours.
    const auto add = [&](const std::string& name, zip_source_t* source) {
        if (source == nullptr) return false;
        if (zip_file_add(archive, name.c_str(), source, ZIP_FL_ENC_CP437) >= 0) return true;
        zip_source_free(source);
        return false;
    };
    // ZIP_FL_ENC_CP437: the names' bytes are stored as given and the UTF-8 flag stays off.
    const bool added =
        add(*detail_name, zip_source_file_create(csv_path.c_str(), 0, -1, &error)) &&
        add(*summary_name, zip_source_buffer(archive, summary->data(), summary->size(), 0));
    zip_error_fini(&error);
    if (!added || zip_close(archive) != 0) {
        const std::string message = zip_strerror(archive);
        zip_discard(archive);
        throw BillError(zip_path + ": cannot write the zip archive: " + message);
    }
}

SimulateBillReport SimulateBill(const std::string& database_url, const SimulateBillOptions& options,
                                std::ostream& stdout_stream, std::ostream& log) {
    const auto day = ShanghaiDay(options.date);
    if (!day) throw BillError("--date must be a date YYYY-MM-DD, not \"" + options.date + "\"");
    if (options.drop < 0 || options.alter < 0) {
        throw BillError("--drop and --alter must not be negative");
    }
    const bool zip = options.platform == Platform::kAlipay && EndsWith(options.out_path, ".zip");
    const std::string csv_path = zip ? options.out_path + ".csv.tmp" : options.out_path;
    std::unique_ptr<Sink> sink;
    if (options.out_path.empty()) {
        sink = std::make_unique<StreamSink>(stdout_stream);
    } else if (options.platform == Platform::kWechat && EndsWith(options.out_path, ".gz")) {
        sink = std::make_unique<GzipSink>(options.out_path);
    } else {
        sink = std::make_unique<FileSink>(csv_path);
    }
    std::optional<WechatWriter> wechat;
    std::optional<AlipayWriter> alipay;
    if (options.platform == Platform::kWechat) {
        wechat.emplace(*sink, options);
    } else {
        alipay.emplace(*sink, options, *day);
    }

    std::unique_ptr<pqxx::connection> connection =
        Connect(database_url, {.application_name = "payledger simulate-bill",
                               .statement_timeout = std::chrono::minutes{10},
                               .idle_in_transaction_timeout = std::chrono::minutes{10}});
    pqxx::read_transaction tx{*connection};
    std::string sources;  // One parameter, split in SQL; no source has a comma.
    for (const std::string& source : LedgerSources(options.platform)) {
        if (!sources.empty()) sources += ',';
        sources += source;
    }
    tx.exec_params(
        "DECLARE simulate_bill NO SCROLL CURSOR FOR "
        "SELECT e.event_type, e.source, e.out_trade_no, e.transaction_id, "
        "coalesce(p.transaction_id, e.transaction_id), e.amount, e.currency, "
        "(extract(epoch FROM e.occurred_at) * 1000000)::bigint "
        "FROM ledger_events e LEFT JOIN ledger_events p ON p.out_trade_no = e.out_trade_no "
        "AND p.event_type = 'PAYMENT_SUCCEEDED' "
        "WHERE e.event_type IN ('PAYMENT_SUCCEEDED', 'REFUND_SUCCEEDED') "
        "AND e.occurred_at >= 'epoch'::timestamptz + $1::bigint * interval '1 microsecond' "
        "AND e.occurred_at < 'epoch'::timestamptz + $2::bigint * interval '1 microsecond' "
        "AND e.source = ANY(string_to_array($3::text, ',')) ORDER BY e.occurred_at, e.seq",
        day->first, day->second, sources);
    SimulateBillReport report;
    std::int64_t index = 0;
    for (;;) {
        const pqxx::result rows = tx.exec("FETCH FORWARD 1000 FROM simulate_bill");
        if (rows.empty()) break;
        for (const pqxx::row& record : rows) {
            const std::optional<EventType> type = projections::ParseEventType(record[0].c_str());
            PAYLEDGER_ASSERT(type.has_value());
            Row row{.event_type = *type,
                    .source = record[1].as<std::string>(),
                    .out_trade_no = record[2].as<std::string>(),
                    .transaction_id = record[3].as<std::string>(),
                    .payment_transaction_id = record[4].as<std::string>(),
                    .amount = record[5].as<std::int64_t>(),
                    .currency = record[6].as<std::string>(),
                    .occurred_at = record[7].as<std::int64_t>()};
            const std::int64_t position = index++;
            if (position < options.drop) {
                log << "simulate-bill: dropped " << projections::ToString(row.event_type) << ' '
                    << row.out_trade_no << '\n';
                ++report.dropped;
                continue;
            }
            if (position < options.drop + options.alter) {
                const std::int64_t altered =
                    row.amount < projections::kAmountMax ? row.amount + 1 : row.amount - 1;
                log << "simulate-bill: altered " << projections::ToString(row.event_type) << ' '
                    << row.out_trade_no << ": " << row.amount << " -> " << altered << '\n';
                row.amount = altered;
                ++report.altered;
            }
            if (wechat) wechat->Add(row);
            if (alipay) alipay->Add(row);
            ++report.rows;
        }
    }
    tx.commit();
    if (report.dropped < options.drop || report.altered < options.alter) {
        log << "simulate-bill: the day has only " << index << " payments and refunds\n";
    }
    if (wechat) wechat->Finish();
    if (alipay) alipay->Finish();
    sink->Close();
    if (zip) {
        ZipAlipayBill(options.out_path, csv_path, options.alipay_account, options.date);
        std::remove(csv_path.c_str());
    }
    return report;
}

}  // namespace payledger::ledger::reconcile
