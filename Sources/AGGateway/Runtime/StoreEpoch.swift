import AGFormats
import AGSync

/// What this instance knows of the store epoch (`StoreEpochScript`): the value it remembers of
/// each epoch key (one, or one per cluster shard) and the resets it noticed that no operator
/// has acknowledged yet. Shared by the control loop, which checks the epochs, and the workers,
/// whose `/readyz` reports unacknowledged resets.
final class StoreEpoch: Sendable {
    /// One noticed reset: a Redis (or a cluster shard) no longer held the epoch this instance
    /// remembered.
    struct Reset: Sendable, Equatable {
        /// Unix ms of the check that noticed it.
        let noticedMilliseconds: Int64
    }

    /// What one read of one epoch key found.
    enum Observation: Equatable {
        /// The first value this instance read of the key; `created` when this read wrote it
        /// (the key was missing: a fresh Redis or shard, one that lost its data before this
        /// instance started, or, in a cluster, a key of a slot not used for an epoch before).
        case first(created: Bool)
        case unchanged
        /// The remembered value is gone: its Redis or shard restarted empty or was flushed.
        case reset
    }

    private struct State {
        /// The value each epoch key held when this instance last read it.
        var epochs: [String: String] = [:]
        var unacknowledged: [Reset] = []
    }

    private let state = Locked(State())

    /// Records the value a read of `key` found.
    func observe(_ epoch: String, key: String, created: Bool) -> Observation {
        state.withLock { state in
            guard let remembered = state.epochs.updateValue(epoch, forKey: key) else { return .first(created: created) }
            return remembered == epoch ? .unchanged : .reset
        }
    }

    /// The epoch keys this instance has read, in no particular order.
    var rememberedKeys: [String] { state.withLock { Array($0.epochs.keys) } }

    /// Records a reset for `/readyz` until it is acknowledged.
    func noticeReset(nowMilliseconds: Int64) {
        state.withLock { $0.unacknowledged.append(Reset(noticedMilliseconds: nowMilliseconds)) }
    }

    /// Resets noticed and not yet acknowledged, oldest first.
    var unacknowledgedResets: [Reset] { state.withLock { $0.unacknowledged } }

    /// Clears the noticed resets; returns how many there were.
    func acknowledge() -> Int {
        state.withLock { state in
            defer { state.unacknowledged = [] }
            return state.unacknowledged.count
        }
    }
}

/// The `/readyz` body: `{"status":"ready","configGeneration":N}`, plus `warnings` while a store
/// reset is unacknowledged.
enum ReadinessBody {
    static func render(generation: Int, resets: [StoreEpoch.Reset]) -> String {
        var json = JSONObjectWriter()
        json.add("status", "ready")
        json.add("configGeneration", generation)
        guard let last = resets.last else { return json.finished() }
        var warning = JSONObjectWriter()
        warning.add("code", "store_reset")
        warning.add("message", "redis came back empty since this instance started: device records and other state are gone")
        warning.add("count", resets.count)
        warning.add("lastNoticedAt", UTCDateTime(unixMilliseconds: last.noticedMilliseconds).iso8601(fractional: true))
        warning.add("hint", "POST /admin/v1/store/acknowledge-reset clears this warning")
        json.add("warnings", rawJSON: "[" + warning.finished() + "]")
        return json.finished()
    }
}
