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
            #expect(machine.state == .draining(linger: false))
            #expect(machine.responseFinished(reusable: true) == .none, "answered twice is ignored")
            #expect(machine.outputDrained() == .close)
            #expect(machine.isClosed)
            #expect(machine.outputDrained() == .none)
        }
    }

    @Test func anAnswerWhileTheClientMaySendLingersAfterItIsWritten() {
        var machine = HTTPConnectionStateMachine()
        machine.requestStarted(keepAlive: true)
        #expect(machine.responseFinished(reusable: false, clientMaySend: true) == .drainThenLinger)
        #expect(machine.state == .draining(linger: true))
        #expect(machine.discardsInput, "input is dropped while the answer drains")
        #expect(machine.outputDrained() == .linger)
        #expect(machine.state == .lingering)
        #expect(machine.discardsInput)
        #expect(machine.outputDrained() == .none)
        #expect(machine.peerClosed(requestComplete: true) == .close, "the client's close ends the lingering")
        #expect(machine.isClosed)
        var reusable = HTTPConnectionStateMachine()
        reusable.requestStarted(keepAlive: true)
        #expect(reusable.responseFinished(reusable: true, clientMaySend: true) == .readNextRequest,
                "a reusable connection reads the next request instead")
    }

    @Test func noLingeringOnceTheClientHalfClosedOrTheServerShutsDown() {
        var halfClosed = HTTPConnectionStateMachine()
        halfClosed.requestStarted(keepAlive: true)
        #expect(halfClosed.peerClosed(requestComplete: true) == .stopReading)
        #expect(halfClosed.responseFinished(reusable: false, clientMaySend: true) == .drainThenClose)
        var closedWhileDraining = HTTPConnectionStateMachine()
        closedWhileDraining.requestStarted(keepAlive: false)
        #expect(closedWhileDraining.responseFinished(reusable: false, clientMaySend: true) == .drainThenLinger)
        #expect(closedWhileDraining.peerClosed(requestComplete: true) == .stopReading, "the answer still goes out")
        #expect(closedWhileDraining.outputDrained() == .close)
        var shuttingDown = HTTPConnectionStateMachine()
        shuttingDown.requestStarted(keepAlive: true)
        #expect(shuttingDown.shutdown() == .none)
        #expect(shuttingDown.responseFinished(reusable: true, clientMaySend: true) == .drainThenClose)
        var drainingAtShutdown = HTTPConnectionStateMachine()
        drainingAtShutdown.requestStarted(keepAlive: false)
        _ = drainingAtShutdown.responseFinished(reusable: false, clientMaySend: true)
        #expect(drainingAtShutdown.shutdown() == .stopReading)
        #expect(drainingAtShutdown.outputDrained() == .close)
        var lingeringAtShutdown = HTTPConnectionStateMachine()
        lingeringAtShutdown.requestStarted(keepAlive: false)
        _ = lingeringAtShutdown.responseFinished(reusable: false, clientMaySend: true)
        _ = lingeringAtShutdown.outputDrained()
        #expect(lingeringAtShutdown.shutdown() == .close, "a lingering connection does not hold the shutdown")
        #expect(lingeringAtShutdown.isClosed)
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
