/// The subscriber role: `SUBSCRIBE` after the handshake, messages to the handler, and a health
/// check that works with hiredis 0.14.
///
/// Why the health check is a repeated `SUBSCRIBE` and not a `PING`: in subscribed mode hiredis
/// 0.14 files the callback of any other command under `sub.invalid`, but routes every array
/// reply by its second element as a channel name. Redis answers `PING` there with the array
/// `["pong", ""]`, so the PING's callback never runs (its deadline then dropped a healthy
/// connection every two intervals, losing messages), and `PING <channel>` would leave one
/// `sub.invalid` entry behind per probe. Subscribing again to an already-subscribed channel is
/// answered with `["subscribe", channel, count]`, which hiredis routes to the channel's own
/// callback, and leaves nothing behind.
extension RedisConnection {
    func subscribe(_ channels: [String], on context: HiredisContext) {
        context.unconfirmedSubscriptions = channels.count
        guard context.subscribe(channels) else {
            drop(context, reason: "SUBSCRIBE rejected by hiredis")
            return
        }
        context.subscriptionProbe = probe(on: context, what: "SUBSCRIBE")
    }

    /// A deadline for a subscription confirmation: missing it drops the connection.
    private func probe(on context: HiredisContext, what: String) -> PendingCommand {
        let timeout = settings.timeout
        let command = PendingCommand(deadline: .now + timeout) { [weak self, weak context] result in
            guard case .failure(.timeout) = result, let self, let context else { return }
            self.drop(context, reason: "\(self.peer ?? "server"): \(what) not confirmed within \(timeout)")
        }
        track(command)
        return command
    }

    func armHealthCheck() {
        healthCheckTimer?.arm(after: settings.timeout)
    }

    func healthCheckTimerFired() {
        guard state == .connected, let context, case .subscriber(let channels, _) = role else { return }
        guard context.subscribe([channels[0]]) else {
            drop(context, reason: "health-check SUBSCRIBE rejected by hiredis")
            return
        }
        context.subscriptionProbe = probe(on: context, what: "health-check SUBSCRIBE")
    }

    /// A confirmation or message on a subscribed connection.
    func subscriptionPushed(_ value: RedisValue, on context: HiredisContext) {
        guard context === self.context, case .subscriber(_, let onMessage) = role, let parts = value.array,
              parts.count == 3, let kind = parts[0].string, let channel = parts[1].string else { return }
        switch kind {
        case "subscribe" where state == .connecting:
            context.unconfirmedSubscriptions -= 1
            guard context.unconfirmedSubscriptions == 0 else { return }
            context.subscriptionProbe?.complete(.success(.null))
            context.subscriptionProbe = nil
            connectionEstablished()
        case "subscribe":
            // The health check's answer: the server and the connection are alive.
            context.subscriptionProbe?.complete(.success(.null))
            context.subscriptionProbe = nil
            armHealthCheck()
        case "message":
            onMessage(RedisMessage(channel: channel, payload: parts[2].bytes ?? []))
        default:
            break
        }
    }
}
