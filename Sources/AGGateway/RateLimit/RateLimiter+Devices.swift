import AGPolicy
import AGRedis

/// Proxied requests with a token, without a Redis round trip per request (issue 11 item 3) and
/// without losing a revocation (issue 9 item 2).
///
/// Every reply of the `api` lease script (and of the device check) carries the tenant's device
/// epoch (`DeviceEpoch`), which every revocation and invalidation bumps atomically. A cached
/// token remembers the epoch at which its device record was last found in good standing: while
/// that is the epoch this worker learned within the last `LeaseSizing.lifetimeMicroseconds`,
/// the request costs no Redis call at all (a leased token is spent locally); when the lease is
/// due, its call reads the epoch again. Only when the epoch moved does one round trip read the
/// record and the epoch (`AdmissionScripts.deviceStanding`).
///
/// Staleness bound: an epoch counts as current for one lease lifetime (1 s) after the call
/// that read it was *sent*, so a revocation made at time T is seen by every worker's requests
/// from T + 1 s on (sooner through the events stream), which is also how long a lease lives.
extension RateLimiter {
    /// The device epoch of one tenant as this worker last read it.
    struct KnownEpoch {
        let value: String
        /// When the call that read it was sent (Unix µs): a reply to an older call never
        /// replaces the answer to a newer one.
        let sentAt: Int64
    }

    /// The tenant's epoch, when read by a call sent within the last lease lifetime.
    func currentEpoch(_ key: String, now: Int64) -> String? {
        guard let known = epochs[key], now < known.sentAt + LeaseSizing.lifetimeMicroseconds else { return nil }
        return known.value
    }

    /// Records `value`, read by a call sent at `sentAt`.
    func learnEpoch(_ key: String, _ value: String, sentAt: Int64) {
        if let known = epochs[key], known.sentAt > sentAt { return }
        epochs[key] = KnownEpoch(value: value, sentAt: sentAt)
    }

    /// The steady state of `admit`, per proxied request, decided at once: the epoch read
    /// within the last lease lifetime is the one the token was checked at, and the lease holds
    /// a token. That is what `lease` then `settle` would decide, without their closures (nor
    /// the caller's: `Limiter.admitNow`). Nil when Redis has to be asked.
    func admitNow(_ check: BucketCheck, device: DeviceCheck) -> DeviceAdmission? {
        guard let checkedAt = device.checkedAt, let known = epochs[device.epochKey], checkedAt == known.value,
              time.nowMicroseconds < known.sentAt + LeaseSizing.lifetimeMicroseconds,
              let outcome = spendLeased(check) else { return nil }
        return .checked(outcome, epoch: checkedAt)
    }

    /// The proxied request's device standing and `api` token (see `Limiter.admit`).
    func admit(_ check: BucketCheck, device: DeviceCheck, fallback: RateLimitFallback,
               completion: @escaping (DeviceAdmission) -> Void) {
        // Checked at the last epoch this worker read, current or not: the lease decides alone
        // (spent locally, or the lease call reads the epoch again, and only a moved epoch costs
        // a record read). A lapsed lease must not make every token of a quiet tenant read its
        // record once a second.
        if let admission = admitNow(check, device: device) { return completion(admission) }
        if let checkedAt = device.checkedAt, checkedAt == epochs[device.epochKey]?.value {
            lease(check, epochKey: device.epochKey, fallback: fallback) { [self] outcome in
                settle(check, device, checkedAt: checkedAt, outcome, completion)
            }
        } else {
            readStanding(device) { [self] read in
                guard let read else { return completion(.unverified(spendLeased(check) ?? fallbackOutcome([check], fallback))) }
                guard read.standing == .active else { return completion(.refused(read.standing)) }
                lease(check, epochKey: device.epochKey, fallback: fallback) { [self] outcome in
                    settle(check, device, checkedAt: read.epoch, outcome, completion)
                }
            }
        }
    }

    /// After the token came from the lease: the epoch must be current (else Redis could not
    /// be asked: unverified), and if it moved since the token was checked, the record is read
    /// again before a granted request goes on.
    private func settle(_ check: BucketCheck, _ device: DeviceCheck, checkedAt epoch: String, _ outcome: RateLimitOutcome,
                        _ completion: @escaping (DeviceAdmission) -> Void) {
        guard let current = currentEpoch(device.epochKey, now: time.nowMicroseconds) else {
            return completion(.unverified(outcome))
        }
        guard current != epoch, case .allowed = outcome else {
            return completion(.checked(outcome, epoch: current == epoch ? epoch : nil))
        }
        readStanding(device) { read in
            guard let read else { return completion(.unverified(outcome)) }
            completion(read.standing == .active ? .checked(outcome, epoch: read.epoch) : .refused(read.standing))
        }
    }

    /// One round trip: the device record's standing and the tenant's epoch, read atomically;
    /// nil when Redis could not answer.
    private func readStanding(_ device: DeviceCheck,
                              completion: @escaping ((epoch: String, standing: AdmissionScripts.DeviceStanding)?) -> Void) {
        let sent = time.nowMicroseconds
        redis.evalScript(AdmissionScripts.deviceStanding, keys: [device.epochKey, device.deviceKey],
                         args: [String(sent), DeviceEpoch.seed()]) { [self] result in
            if case .success(let reply) = result, let (epoch, standing) = AdmissionScripts.standing(from: reply) {
                leaveFallback()
                learnEpoch(device.epochKey, epoch, sentAt: sent)
                return completion((epoch, standing))
            }
            let reason = if case .failure(let error) = result { error.description } else { "unexpected device check reply" }
            enterFallback(reason: reason)
            completion(nil)
        }
    }
}
