#pragma once

#include <cstddef>

// The committer's bounds that the config's `limits` section sets (README.md#configuration), their
// defaults written once for ledger::Committer::Options and api::Limits. No libpqxx here: the
// config's parser includes it.
namespace payledger::ledger {

// `limits.write_queue_bytes_max`: 1 000 bodies of 64 KiB.
inline constexpr std::size_t kWriteQueueBytesMaxDefault = 64 * 1024 * 1024;

// `limits.writer_cache_orders` (docs/write-path.md#the-writer-cache): about 600 bytes an order with
// one or two events (bench/load), at most about 2 KiB (four events, the longest keys and
// transaction ids): 30 MiB, at most about 100 MiB.
inline constexpr std::size_t kWriterCacheOrdersDefault = 50'000;

}  // namespace payledger::ledger
