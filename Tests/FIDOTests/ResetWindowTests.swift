import FIDOAuthenticator
import FIDOProtocol
import Synchronization
import Testing

/// CTAP 2.1 §6.6: `authenticatorReset` is taken only within 10 s of the power cycle's start. The authenticator reads
/// the time from a clock the test moves, so neither side of the window waits on the wall clock or the scheduler: a
/// reset at 10 s is refused before anyone is asked, one a millisecond earlier asks the user (who declines here, so no
/// keychain is read). The reset inside the window, with the finger and a real keychain, is `FIDOAuthenticatorTests`'.
@Suite("FIDO: the reset window")
struct ResetWindowTests {
    /// A reset `age` after power-up; its status byte and whether the user was asked.
    func reset(poweredUp age: Duration) async -> (status: UInt8?, asked: Bool) {
        let poweredUp = ContinuousClock.now
        let now = Mutex(poweredUp)
        let asked = Mutex(false)
        let authenticator = FIDOAuthenticator(
            approve: { _, _ in
                asked.withLock { $0 = true }
                throw CTAP2.Status.operationDenied
            }, clock: { now.withLock { $0 } })
        now.withLock { $0 = poweredUp + age }
        let answer = await authenticator.respond(to: [CTAP2.Command.reset.rawValue])
        return (answer.first, asked.withLock { $0 })
    }

    @Test func aResetTenSecondsAfterPowerUpIsRefusedWithoutAsking() async {
        let late = await reset(poweredUp: .seconds(10))
        #expect(late.status == CTAP2.Status.notAllowed.rawValue)
        #expect(!late.asked, "nobody is asked outside the window")
    }

    @Test func aResetJustWithinTenSecondsAsksTheUser() async {
        let early = await reset(poweredUp: .seconds(10) - .milliseconds(1))
        #expect(early.asked, "the user is asked inside the window")
        #expect(early.status == CTAP2.Status.operationDenied.rawValue, "the user's refusal is the answer")
    }
}
