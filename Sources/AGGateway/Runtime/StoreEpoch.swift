import AGFormats
import AGSync

/// What this instance knows of the store epoch (`StoreEpochScript`): the value it remembers and
/// the resets it noticed that no operator has acknowledged yet. Shared by the control loop,
/// which checks the epoch, and the workers, whose `/readyz` reports unacknowledged resets.
final class StoreEpoch: Sendable {
    /// One noticed reset: Redis no longer held the epoch this instance remembered.
    struct Reset: Sendable, Equatable {
        /// Unix ms of the check that noticed it.
        let noticedMilliseconds: Int64
    }

    /// What one check found.
    enum Observation: Equatable {
        /// The first epoch this instance read; `created` when this check wrote it (Redis held
        /// none: a fresh Redis, or one that lost its data before this instance started).
        case first(created: Bool)
        case unchanged
        /// The remembered epoch is gone: Redis restarted empty or was flushed.
        case reset
    }

    private struct State {
        var epoch: String?
        var unacknowledged: [Reset] = []
    }

    private let state = Locked(State())

    /// Records the epoch a check read.
    func observe(_ epoch: String, created: Bool, nowMilliseconds: Int64) -> Observation {
        state.withLock { state in
            guard let remembered = state.epoch else {
                state.epoch = epoch
                return .first(created: created)
            }
            guard remembered != epoch else { return .unchanged }
            state.epoch = epoch
            state.unacknowledged.append(Reset(noticedMilliseconds: nowMilliseconds))
            return .reset
        }
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
