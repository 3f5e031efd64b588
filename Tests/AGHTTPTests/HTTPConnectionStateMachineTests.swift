@testable import AGHTTP
import Testing

/// The server connection's one state machine, transition by transition (no sockets).
@Suite struct HTTPConnectionStateMachineTests {
    @Test func keepAliveRequestsReturnToIdle() {
        var machine = HTTPConnectionStateMachine()
        #expect(machine.partialHeadArrived() == .startHeadDeadline)
        #expect(machine.state == .readingHead)
        #expect(machine.partialHeadArrived() == .none, "the deadline starts once per head, never again")
        machine.requestStarted(keepAlive: true)
        #expect(machine.state == .serving(.init(keepAlive: true)))
        #expect(machine.responseFinished(reusable: true) == .readNextRequest)
        #expect(machine.state == .idle)
        machine.requestStarted(keepAlive: true)
        #expect(machine.responseFinished(reusable: true) == .readNextRequest, "a head that arrived whole skips readingHead")
    }

    @Test func closingRequestsDrainThenClose() {
        for (keepAlive, reusable) in [(false, true), (true, false), (false, false)] {
            var machine = HTTPConnectionStateMachine()
            machine.requestStarted(keepAlive: keepAlive)
            #expect(machine.responseFinished(reusable: reusable) == .drainThenClose)
            #expect(machine.state == .draining)
            #expect(machine.responseFinished(reusable: true) == .none, "answered twice is ignored")
            #expect(machine.outputDrained() == .close)
            #expect(machine.isClosed)
            #expect(machine.outputDrained() == .none)
        }
    }

    @Test func outputDrainedOutsideDrainingDoesNothing() {
        var machine = HTTPConnectionStateMachine()
        #expect(machine.outputDrained() == .none)
        machine.requestStarted(keepAlive: true)
        #expect(machine.outputDrained() == .none)
        #expect(machine.state == .serving(.init(keepAlive: true)))
    }

    @Test func halfCloseAfterACompleteRequestStillAnswers() {
        var machine = HTTPConnectionStateMachine()
        machine.requestStarted(keepAlive: true)
        #expect(machine.peerClosed(requestComplete: true) == .stopReading)
        #expect(machine.state == .serving(.init(keepAlive: true, peerClosed: true)))
        #expect(machine.responseFinished(reusable: true) == .drainThenClose, "no next request after the client's FIN")
    }

    @Test func peerClosingMidRequestOrIdleCloses() {
        var reading = HTTPConnectionStateMachine()
        reading.requestStarted(keepAlive: true)
        #expect(reading.peerClosed(requestComplete: false) == .close)
        #expect(reading.isClosed)
        var idle = HTTPConnectionStateMachine()
        #expect(idle.peerClosed(requestComplete: true) == .close)
        #expect(idle.peerClosed(requestComplete: true) == .none)
    }

    @Test func shutdownClosesIdleAndFinishesBusy() {
        var idle = HTTPConnectionStateMachine()
        #expect(idle.shutdown() == .close)
        var partial = HTTPConnectionStateMachine()
        _ = partial.partialHeadArrived()
        #expect(partial.shutdown() == .close)
        var busy = HTTPConnectionStateMachine()
        busy.requestStarted(keepAlive: true)
        #expect(busy.shutdown() == .none)
        #expect(busy.responseFinished(reusable: true) == .drainThenClose)
    }

    @Test func abortClosesOnceFromAnyState() {
        var machine = HTTPConnectionStateMachine()
        machine.requestStarted(keepAlive: true)
        #expect(machine.abort() == .close)
        #expect(machine.abort() == .none)
        machine.requestStarted(keepAlive: true)
        #expect(machine.isClosed, "a closed connection starts nothing")
        #expect(machine.partialHeadArrived() == .none)
    }
}

/// The TLS handshake state in front of the first request.
@Suite struct HTTPConnectionStateMachineTLSTests {
    @Test func aTLSConnectionHandshakesBeforeItsFirstRequest() {
        var machine = HTTPConnectionStateMachine(handshaking: true)
        #expect(machine.state == .handshaking)
        #expect(machine.partialHeadArrived() == .none, "no head deadline before the handshake finished")
        machine.requestStarted(keepAlive: true)
        #expect(machine.state == .handshaking, "no request before the handshake")
        machine.handshakeCompleted()
        #expect(machine.state == .idle)
        machine.handshakeCompleted()
        #expect(machine.state == .idle, "a second completion changes nothing")
        #expect(machine.partialHeadArrived() == .startHeadDeadline)
    }

    @Test func shutdownAndAbortCloseAHandshakingConnection() {
        var shuttingDown = HTTPConnectionStateMachine(handshaking: true)
        #expect(shuttingDown.shutdown() == .close)
        #expect(shuttingDown.isClosed)
        var aborted = HTTPConnectionStateMachine(handshaking: true)
        #expect(aborted.abort() == .close)
        #expect(aborted.isClosed)
        var peerGone = HTTPConnectionStateMachine(handshaking: true)
        #expect(peerGone.peerClosed(requestComplete: false) == .close)
    }
}
