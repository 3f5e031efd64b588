import AGTestSupport
import Testing

/// `poll`, the deadline-bound wait of the async tests: a test task can be starved past its
/// deadline (two pool threads, shared with tests that block them), and a wait must then still
/// look once before it counts as failed.
@Suite struct PollingTests {
    /// The first look overruns the deadline, as a starved task does; the condition held by then.
    /// A loop that checked the clock after a false look gave up here without looking again.
    @Test func aLookThatOverranTheDeadlineIsFollowedByOneMore() async throws {
        var looks = 0
        let held = try await poll(within: .milliseconds(20)) {
            looks += 1
            if looks == 1 {
                try await Task.sleep(for: .milliseconds(100))
                return false
            }
            return true
        }
        #expect(held)
        #expect(looks == 2)
    }

    /// A condition that never holds is answered false once a look begun after the deadline
    /// found it false, and not before.
    @Test func aConditionThatNeverHoldsIsFalseAfterTheDeadline() async throws {
        let start = ContinuousClock.now
        var looks = 0
        let held = await poll(within: .milliseconds(50), every: .milliseconds(5)) {
            looks += 1
            return false
        }
        #expect(!held)
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        #expect(looks >= 2)
    }

    @Test func aConditionThatHoldsAtOnceIsLookedAtOnce() async throws {
        var looks = 0
        #expect(await poll(within: .seconds(10)) { looks += 1; return true })
        #expect(looks == 1)
    }
}
