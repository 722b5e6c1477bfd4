// Tests of api/channels/platform_crypto.hpp (and the v2 signing of api/channels/wechat_v2_xml.hpp)
// against the published and independently computed vectors of docs/platforms.md#test-vectors: the
// WeChat Pay v2 MD5 and HMAC-SHA256 signatures, the v2 refund req_info under AES-256-ECB, the v3
// AES-256-GCM resources. Key parsing, RSA-SHA256 and the ciphers' refusals are tables (base64 is
// tests/ledger/base/bytes_test.cpp's); RSA keys are generated in the test (EVP_PKEY_Q_keygen),
// never stored. An encrypted key file is refused without OpenSSL asking for a passphrase (stdin a
// pipe).

#include "api/channels/platform_crypto.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/channels/wechat_v2_xml.hpp"
#include "ledger/base/bytes.hpp"

namespace payledger::api {
namespace {

constexpr const char* kV2Key = "192006250b4c09247ec02edce69f6a2d";
constexpr const char* kV3Key = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";

const PlatformFields kV2DocFields{{"appid", "wxd930ea5d5a258f4f"},
                                  {"mch_id", "10000100"},
                                  {"device_info", "1000"},
                                  {"body", "test"},
                                  {"nonce_str", "ibuaiVcKdpRxkhJA"}};

const PrivateKey& TestKey() {
    static const PrivateKey key = GenerateRsaKey();
    return key;
}

TEST(PlatformCrypto, WechatV2Md5MatchesTheOfficialVector) {
    EXPECT_EQ(Md5HexUpper("appid=wxd930ea5d5a258f4f&body=test&device_info=1000&mch_id=10000100&"
                          "nonce_str=ibuaiVcKdpRxkhJA&key=192006250b4c09247ec02edce69f6a2d"),
              "9A0A8659F005D6984697E2CA0A9CF3B7");
    EXPECT_EQ(WechatV2Sign(kV2DocFields, kV2Key, WechatV2SignType::kMd5),
              "9A0A8659F005D6984697E2CA0A9CF3B7");
}

TEST(PlatformCrypto, WechatV2HmacSha256MatchesTheVector) {
    EXPECT_EQ(WechatV2Sign(kV2DocFields, kV2Key, WechatV2SignType::kHmacSha256),
              "6A9AE1657590FD6257D693A078E1C3E4BB6BA4DC30B23E0EE2496E54170DACD6");
}

TEST(PlatformCrypto, WechatV2SignSkipsSignAndEmptyValuesButSignsSignType) {
    PlatformFields fields = kV2DocFields;
    fields["sign"] = "ANYTHING";
    fields["attach"] = "";
    EXPECT_EQ(WechatV2Sign(fields, kV2Key, WechatV2SignType::kMd5),
              "9A0A8659F005D6984697E2CA0A9CF3B7");
    fields["sign_type"] = "MD5";
    EXPECT_NE(WechatV2Sign(fields, kV2Key, WechatV2SignType::kMd5),
              "9A0A8659F005D6984697E2CA0A9CF3B7");
}

TEST(PlatformCrypto, WechatV2RefundReqInfoDecryptsWithTheMd5OfTheKey) {
    EXPECT_EQ(Md5HexLower(kV2Key), "d96eb16afdd491fa1e705096edbc2205");
    const std::optional<std::string> sealed = ledger::Base64Decode(
        "WBzGpzQuNpcFxIlFjUUD9FfL63k7xseO4O//CGiq57k0oCGtUH2ML1QruzOWq0kSGfMbJOQWosn8CerF3w4hes"
        "scCLxDEz2JrJD/+Ws+2mvZjj9mJlfP/DxnRql2fprRFrV+P4SiuCd3Hd83F/coBhrcs+CyO9mDFp5jKuFXTkpu"
        "OSPrLCDbtwTJNNo9kVg2");
    ASSERT_TRUE(sealed);
    EXPECT_EQ(Aes256EcbDecrypt(Md5HexLower(kV2Key), *sealed),
              "<root><out_refund_no><![CDATA[R-0001]]></out_refund_no><refund_fee>100</"
              "refund_fee><refund_status><![CDATA[SUCCESS]]></refund_status></root>");
    EXPECT_EQ(ledger::Base64Encode(Aes256EcbEncrypt(Md5HexLower(kV2Key), "x")).size(), 24u);
}

TEST(PlatformCrypto, AesEcbRefusesBadInput) {
    const std::string key = Md5HexLower(kV2Key);
    EXPECT_FALSE(Aes256EcbDecrypt(key, ""));
    EXPECT_FALSE(Aes256EcbDecrypt(key, std::string(15, 'a')));
    EXPECT_FALSE(Aes256EcbDecrypt("short", std::string(16, 'a')));
    std::string sealed = Aes256EcbEncrypt(key, "hello");
    EXPECT_EQ(Aes256EcbDecrypt(key, sealed), "hello");
    // Deterministic inputs: the garbled last block has no valid PKCS#7 padding.
    sealed.back() = static_cast<char>(sealed.back() ^ 1);
    EXPECT_FALSE(Aes256EcbDecrypt(key, sealed).has_value());
    EXPECT_FALSE(Aes256EcbDecrypt(std::string(32, 'k'), Aes256EcbEncrypt(key, "hello")));
}

TEST(PlatformCrypto, WechatV3GcmMatchesTheSdkVector) {
    const std::optional<std::string> sealed =
        ledger::Base64Decode("ulwSiIajGClcvcOYvOQ7+l+0PAbzzwI=");
    ASSERT_TRUE(sealed);
    EXPECT_EQ(Aes256GcmDecrypt(kV3Key, "uluk4a9R25RW", "associatedData", *sealed), "message");
}

TEST(PlatformCrypto, WechatV3GcmMatchesTheComputedVector) {
    const std::string plaintext =
        R"({"out_trade_no":"T1","trade_state":"SUCCESS","amount":{"total":100}})";
    const std::string ciphertext =
        "ussMtczjsP2XKNFRfhwhjLPICApykzvAmbofuXb/Wz8ntxR2SPpDdkFZFlnaOjVMUYqPjk+JdCWmCJBbf4NZ/"
        "wDX0DepFXoZB9CV23q8hwWfjiAV";
    EXPECT_EQ(
        Aes256GcmDecrypt(kV3Key, "n0nce12chars", "transaction", *ledger::Base64Decode(ciphertext)),
        plaintext);
    EXPECT_EQ(
        ledger::Base64Encode(Aes256GcmEncrypt(kV3Key, "n0nce12chars", "transaction", plaintext)),
        ciphertext);
}

TEST(PlatformCrypto, GcmRefusesTamperingAndWrongInputs) {
    const std::string sealed = *ledger::Base64Decode("ulwSiIajGClcvcOYvOQ7+l+0PAbzzwI=");
    std::string flipped = sealed;
    flipped[0] = static_cast<char>(flipped[0] ^ 1);
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, "uluk4a9R25RW", "associatedData", flipped));
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, "uluk4a9R25RW", "other", sealed));
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, "uluk4a9R25RX", "associatedData", sealed));
    EXPECT_FALSE(Aes256GcmDecrypt("a7cde1ZJB1kG2e7VfTs3jQzaWizur8GX", "uluk4a9R25RW",
                                  "associatedData", sealed));
    EXPECT_FALSE(Aes256GcmDecrypt("short", "uluk4a9R25RW", "associatedData", sealed));
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, "uluk4a9R25RW", "associatedData", sealed.substr(0, 15)));
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, "", "associatedData", sealed));
}

// A nonce up to OpenSSL's limit round-trips; one byte more is refused on both sides, as an
// argument error when sealing (the fuzzer found it as an OpenSSL failure), never a crash.
TEST(PlatformCrypto, GcmNoncesUpToTheLimitRoundTripAndLongerAreRefused) {
    const std::string longest(kGcmNonceMaxBytes, 'n');
    const std::string sealed = Aes256GcmEncrypt(kV3Key, longest, "aad", "message");
    EXPECT_EQ(Aes256GcmDecrypt(kV3Key, longest, "aad", sealed), "message");
    const std::string too_long = longest + "n";
    EXPECT_THROW((void)Aes256GcmEncrypt(kV3Key, too_long, "aad", "message"), std::invalid_argument);
    EXPECT_THROW((void)Aes256GcmEncrypt(kV3Key, "", "aad", "message"), std::invalid_argument);
    EXPECT_FALSE(Aes256GcmDecrypt(kV3Key, too_long, "aad", sealed));
}

TEST(PlatformCrypto, RsaSha256SignsAndVerifies) {
    const PublicKey public_key = TestKey().Public();
    const std::string signature = RsaSha256Sign(TestKey(), "message");
    EXPECT_EQ(signature.size(), 256u);
    EXPECT_TRUE(RsaSha256Verify(public_key, "message", signature));
    EXPECT_FALSE(RsaSha256Verify(public_key, "messagE", signature));
    EXPECT_FALSE(RsaSha256Verify(public_key, "message", signature.substr(1)));
    EXPECT_FALSE(RsaSha256Verify(public_key, "message", ""));
    EXPECT_FALSE(RsaSha256Verify(GenerateRsaKey().Public(), "message", signature));
    EXPECT_FALSE(RsaSha256Verify(PublicKey{}, "message", signature));
}

TEST(PlatformCrypto, PublicKeysParseFromPemAndFromBareBase64Der) {
    const PublicKey original = TestKey().Public();
    const std::string signature = RsaSha256Sign(TestKey(), "m");
    const std::string der = PublicKeyDerBase64(original);
    std::string wrapped;  // Alipay keys are pasted with line breaks too.
    for (std::size_t i = 0; i < der.size(); i += 64) wrapped += der.substr(i, 64) + "\n";
    for (const std::string& text : {PublicKeyPem(original), der, wrapped}) {
        const std::optional<PublicKey> parsed = ParsePublicKey(text);
        ASSERT_TRUE(parsed) << text;
        EXPECT_TRUE(RsaSha256Verify(*parsed, "m", signature));
    }
    const std::optional<PrivateKey> reparsed = ParsePrivateKey(PrivateKeyPem(TestKey()));
    ASSERT_TRUE(reparsed);
    EXPECT_TRUE(RsaSha256Verify(original, "m", RsaSha256Sign(*reparsed, "m")));
}

TEST(PlatformCrypto, KeyParsingRefusesWhatIsNoRsaKey) {
    for (const std::string& text :
         {std::string{}, std::string{"not a key"}, std::string{"Zm9v"},
          std::string{"-----BEGIN PUBLIC KEY-----\nZm9v\n-----END PUBLIC KEY-----\n"},
          PrivateKeyPem(TestKey()), PublicKeyDerBase64(TestKey().Public()) + "AAAA"}) {
        EXPECT_FALSE(ParsePublicKey(text).has_value()) << text;
    }
    EXPECT_FALSE(ParsePrivateKey(PublicKeyPem(TestKey().Public())).has_value());
    EXPECT_FALSE(ParsePrivateKey("garbage").has_value());
}

// OpenSSL's default for an encrypted PEM asks for the passphrase on the terminal or, without
// one, reads it from stdin: `serve` would block at start. Here stdin is a pipe holding the
// passphrase: the keys must be refused and the pipe left unread.
TEST(PlatformCrypto, EncryptedKeysAreRefusedWithoutAskingForAPassphrase) {
    std::string pem;
    {
        std::unique_ptr<BIO, decltype(&BIO_free)> bio{BIO_new(BIO_s_mem()), BIO_free};
        ASSERT_TRUE(bio);
        ASSERT_EQ(PEM_write_bio_PKCS8PrivateKey(bio.get(), TestKey().get(), EVP_aes_256_cbc(),
                                                "secret", 6, nullptr, nullptr),
                  1);
        char* data = nullptr;
        const long size = BIO_get_mem_data(bio.get(), &data);
        pem.assign(data, static_cast<std::size_t>(size));
    }
    ASSERT_NE(pem.find("ENCRYPTED PRIVATE KEY"), std::string::npos);
    int fds[2] = {-1, -1};
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], "secret\n", 7), 7);
    close(fds[1]);
    const int saved_stdin = dup(STDIN_FILENO);
    ASSERT_GE(saved_stdin, 0);
    ASSERT_EQ(dup2(fds[0], STDIN_FILENO), STDIN_FILENO);
    close(fds[0]);
    const bool private_parsed = ParsePrivateKey(pem).has_value();
    const bool public_parsed = ParsePublicKey(pem).has_value();
    char unread[8] = {};
    const ssize_t unread_bytes = read(STDIN_FILENO, unread, sizeof unread);
    dup2(saved_stdin, STDIN_FILENO);
    close(saved_stdin);
    clearerr(stdin);
    EXPECT_FALSE(private_parsed);
    EXPECT_FALSE(public_parsed);
    EXPECT_EQ(unread_bytes, 7);  // Nobody read the passphrase.
}

TEST(PlatformCrypto, RandomHexHasTheLengthAsked) {
    EXPECT_EQ(RandomHex(16).size(), 32u);
    EXPECT_NE(RandomHex(16), RandomHex(16));
}

}  // namespace
}  // namespace payledger::api
