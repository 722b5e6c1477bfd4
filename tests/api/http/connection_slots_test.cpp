// Who gets a connection slot (api/http/connection_slots.hpp), without a server: the limits per
// peer and per address block, the eviction of an idle connection of the biggest holder at the
// limit (its oldest idle one), a refusal only when nothing is idle, and the reserved blocks that
// always get a slot and are never evicted. The server's own test, with real connections, is
// HostilePeersPgTest.SixteenPeersHoldingEverySlotDoNotKeepASeventeenthOut.
#include "api/http/connection_slots.hpp"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

namespace payledger::api {
namespace {

using boost::asio::ip::make_address;
using Peer = ConnectionSlots::Peer;

Peer From(const char* address, bool reserved = false) {
    const auto parsed = make_address(address);
    return {.peer = address, .prefix = PrefixKey(parsed, 24, 48), .reserved = reserved};
}

TEST(PrefixKeyTest, GroupsAddressesByTheirBlock) {
    EXPECT_EQ(PrefixKey(make_address("192.0.2.77"), 24, 48), "192.0.2.0/24");
    EXPECT_EQ(PrefixKey(make_address("192.0.2.77"), 16, 48), "192.0.0.0/16");
    EXPECT_EQ(PrefixKey(make_address("192.0.2.77"), 32, 48), "192.0.2.77/32");
    EXPECT_EQ(PrefixKey(make_address("::ffff:192.0.2.77"), 24, 48), "192.0.2.0/24");
    EXPECT_EQ(PrefixKey(make_address("2001:db8:1:2:3::9"), 24, 48), "2001:db8:1::/48");
    EXPECT_EQ(PrefixKey(make_address("2001:db8:1:ffff::9"), 24, 52), "2001:db8:1:f000::/52");
}

TEST(ConnectionSlotsTest, LimitsPerPeerAndPerBlock) {
    ConnectionSlots slots{
        {.connections_max = 100, .connections_per_peer = 2, .connections_per_prefix = 3}};
    ConnectionSlots::Id id = 0;
    EXPECT_TRUE(slots.Open(id++, From("192.0.2.1")).admitted);
    EXPECT_TRUE(slots.Open(id++, From("192.0.2.1")).admitted);
    EXPECT_FALSE(slots.Open(id++, From("192.0.2.1")).admitted);  // Its peer's third.
    EXPECT_TRUE(slots.Open(id++, From("192.0.2.2")).admitted);
    EXPECT_FALSE(slots.Open(id++, From("192.0.2.3")).admitted);  // Its block's fourth.
    EXPECT_TRUE(slots.Open(id++, From("192.0.3.1")).admitted);   // Another block.
    slots.Close(0);
    EXPECT_TRUE(slots.Open(id++, From("192.0.2.3")).admitted);
    EXPECT_EQ(slots.open(), 4U);
}

TEST(ConnectionSlotsTest, AtTheLimitTheBiggestHoldersOldestIdleConnectionGivesWay) {
    ConnectionSlots slots{
        {.connections_max = 4, .connections_per_peer = 10, .connections_per_prefix = 10}};
    // Block A holds three (ids 0-2), block B one (id 3); all wait for a request.
    ASSERT_TRUE(slots.Open(0, From("192.0.2.1")).admitted);
    ASSERT_TRUE(slots.Open(1, From("192.0.2.2")).admitted);
    ASSERT_TRUE(slots.Open(2, From("192.0.2.3")).admitted);
    ASSERT_TRUE(slots.Open(3, From("198.51.100.1")).admitted);
    slots.SetIdle(0, false);  // Reading a request: not evictable.
    const ConnectionSlots::Admission admission = slots.Open(4, From("203.0.113.9"));
    EXPECT_TRUE(admission.admitted);
    EXPECT_EQ(admission.evict, ConnectionSlots::Id{1});  // A's oldest idle one.
    // Until the evicted one closes, it holds no slot of the limit's: another newcomer evicts again.
    const ConnectionSlots::Admission next = slots.Open(5, From("203.0.113.10"));
    EXPECT_TRUE(next.admitted);
    EXPECT_EQ(next.evict, ConnectionSlots::Id{2});
    slots.Close(1);
    slots.Close(2);
    EXPECT_EQ(slots.open(), 4U);
    EXPECT_EQ(slots.evictions(), 2U);
}

TEST(ConnectionSlotsTest, NothingIdleMeansRefusedButAReservedBlockAlwaysGetsASlot) {
    ConnectionSlots slots{
        {.connections_max = 2, .connections_per_peer = 10, .connections_per_prefix = 10}};
    ASSERT_TRUE(slots.Open(0, From("192.0.2.1")).admitted);
    ASSERT_TRUE(slots.Open(1, From("192.0.2.2")).admitted);
    slots.SetIdle(0, false);
    slots.SetIdle(1, false);
    EXPECT_FALSE(slots.Open(2, From("198.51.100.1")).admitted);
    const ConnectionSlots::Admission platform = slots.Open(3, From("203.0.113.5", true));
    EXPECT_TRUE(platform.admitted);
    EXPECT_FALSE(platform.evict.has_value());  // Beyond the limit: nothing could give way.
    // A reserved connection is never evicted, idle or not.
    slots.SetIdle(3, true);
    EXPECT_FALSE(slots.Open(4, From("198.51.100.2")).admitted);
    slots.SetIdle(1, true);
    const ConnectionSlots::Admission later = slots.Open(5, From("198.51.100.3"));
    EXPECT_TRUE(later.admitted);
    EXPECT_EQ(later.evict, ConnectionSlots::Id{1});
}

}  // namespace
}  // namespace payledger::api
