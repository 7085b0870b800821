import Foundation
import SecureCrypto
import Synchronization

/// Fingerprint unlock of the keychain after a passcode unlock, as on Apple's devices: once the passcode has
/// unlocked the keychain in this daemon's lifetime, locking it keeps the passcode classes' keys in the daemon's
/// memory, AES-256-GCM-sealed under a fresh random key that only a fingerprint match releases (the engine decides
/// the match). The keys are dropped for good, and only the passcode unlocks again, when:
/// - 48 hours have passed since the last passcode unlock (``lifetime``; counted on the engine's boot-time clock,
///   `CLOCK_BOOTTIME`, which nobody can set: stepping the wall clock back does not stretch it);
/// - biometry locks out (5 failed scans: the engine checks the attempt policy before and after each try);
/// - the daemon stops (a reboot, a restart): nothing of this is ever written anywhere.
///
/// Only localauthd keeps a window: embedded clients hold unlocked keys in the kernel keyring, shared by every
/// process of the user, where no fingerprint could guard them (`Enclave.unlockedClassKeysHeldInProcess()`).
final class FingerprintUnlockWindow: Sendable {
    /// How long after a passcode unlock a fingerprint may unlock the keychain.
    static let lifetime: TimeInterval = 48 * 60 * 60

    private struct Kept {
        var key: SecureBytes
        var sealed: AESGCM.SealedBox
    }

    private struct State {
        /// When the window closes; nil: closed (no passcode unlock yet, or dropped).
        var deadline: TimeInterval?
        /// The locked classes' keys, sealed; nil while unlocked (or nothing kept).
        var kept: Kept?
    }

    private let state = Mutex(State())
    private static let associatedData = Data("localauthd fingerprint unlock".utf8)

    /// The passcode unlocked the keychain at `now` (seconds since boot): the window (re)opens for ``lifetime``.
    func passcodeUnlocked(at now: TimeInterval) {
        state.withLock { $0 = State(deadline: now + Self.lifetime, kept: nil) }
    }

    /// Drops whatever is kept and closes the window, until the next passcode unlock.
    func close() {
        state.withLock { $0 = State() }
    }

    /// Whether a fingerprint may unlock at `now` (the window is open and keys are kept); a window past its
    /// deadline is dropped here.
    func canUnlock(at now: TimeInterval) -> Bool {
        state.withLock { state in
            guard let deadline = state.deadline, now < deadline else {
                state = State()
                return false
            }
            return state.kept != nil
        }
    }

    /// The keychain is being locked at `now`: keeps `keys` sealed if the window is open.
    func keep(_ keys: SecureBytes, at now: TimeInterval) {
        guard let key = try? SecureBytes(randomCount: 32),
            let sealed = try? AESGCM.seal(keys, using: key, authenticating: Self.associatedData)
        else { return }
        state.withLock { state in
            guard let deadline = state.deadline, now < deadline else {
                state = State()
                return
            }
            state.kept = Kept(key: key, sealed: sealed)
        }
    }

    /// The kept keys, after a fingerprint match at `now`; nil when the window closed meanwhile. The window stays
    /// open (the next lock keeps the keys again, under a new key) until its deadline.
    func release(at now: TimeInterval) -> SecureBytes? {
        let kept = state.withLock { state -> Kept? in
            guard let deadline = state.deadline, now < deadline else {
                state = State()
                return nil
            }
            defer { state.kept = nil }
            return state.kept
        }
        guard let kept else { return nil }
        return try? AESGCM.open(kept.sealed, using: kept.key, authenticating: Self.associatedData)
    }
}
