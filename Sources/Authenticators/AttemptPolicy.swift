import Foundation

/// A source of wall-clock time for the attempt policy; tests inject one they can move forward.
///
/// Wall-clock time (not a monotonic clock) because the policy's timestamps are persisted and must stay meaningful
/// after the process or the machine restarts.
package protocol AttemptClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's real-time clock.
package struct SystemAttemptClock: AttemptClock {
    /// The system clock.
    package init() {}
    /// `Date()`.
    package func now() -> Date { Date() }
}

/// How many failed attempts each method has had, and what that forbids; persisted in a 0600 file so that killing
/// the process does not reset it.
///
/// Rules (the architecture's lockout section):
/// - 5 consecutive biometric failures lock biometry (``AuthenticationError/Code/biometryLockout``) until a
///   passcode success. Retries (a swipe too short) are not failures.
/// - Passcode failures escalate: after the 5th consecutive failure the next attempt must wait 1 minute, after the
///   6th 5 minutes, after the 7th and 8th 15 minutes, from the 9th on 1 hour, counted from the last failure. A
///   refused attempt never reaches PAM and carries the remaining wait in ``AuthenticationError/retryAfter``.
/// - A passcode success clears both counters and the biometric lockout; a biometric success clears the biometric
///   counter only.
///
/// Every operation re-reads the file under an exclusive `flock`, so several instances and processes sharing one
/// state directory see one policy. There is one policy per state directory; in embedded mode that directory is the
/// user's own, so the counters are per user.
package final class AttemptPolicy: Sendable {
    /// The persisted counters.
    package struct State: Codable, Equatable, Sendable {
        /// Consecutive biometric no-match results since the last success.
        package var biometricFailures = 0
        /// Whether biometry is locked until a passcode success.
        package var biometryLocked = false
        /// Consecutive passcode failures since the last success.
        package var passcodeFailures = 0
        /// When the last passcode failure happened (seconds since 1970).
        package var lastPasscodeFailure: Double?

        /// No failures, not locked.
        package init() {}
    }

    /// Biometric failures that lock biometry.
    package static let biometricFailureLimit = 5

    /// The wait imposed after `failures` consecutive passcode failures (zero below 5).
    package static func passcodeDelay(afterFailures failures: Int) -> Duration {
        switch failures {
        case ..<5: .zero
        case 5: .seconds(60)
        case 6: .seconds(5 * 60)
        case 7, 8: .seconds(15 * 60)
        default: .seconds(60 * 60)
        }
    }

    private let path: String
    private let lockPath: String
    private let clock: any AttemptClock

    /// A policy stored in `directory/attempts.json` (created 0700/0600 on first write).
    package init(directory: String, clock: any AttemptClock = SystemAttemptClock()) throws {
        try PrivateFiles.ensureDirectory(directory)
        self.path = directory + "/attempts.json"
        self.lockPath = directory + "/attempts.lock"
        self.clock = clock
    }

    /// The counters as currently stored.
    package func currentState() throws -> State {
        try PrivateFiles.withExclusiveLock(on: lockPath) { try load() }
    }

    /// Throws `biometryLockout` when biometry is locked.
    package func checkBiometryAllowed() throws {
        if try currentState().biometryLocked {
            throw AuthenticationError(
                .biometryLockout,
                "fingerprint locked after \(Self.biometricFailureLimit) failed attempts; authenticate with the passcode")
        }
    }

    /// Throws `authenticationFailed` with ``AuthenticationError/retryAfter`` while a passcode wait is running.
    package func checkPasscodeAllowed() throws {
        let state = try currentState()
        let delay = Self.passcodeDelay(afterFailures: state.passcodeFailures)
        guard delay > .zero, let last = state.lastPasscodeFailure else { return }
        let elapsed = clock.now().timeIntervalSince1970 - last
        let delaySeconds = Double(delay.components.seconds)
        // A clock that went backwards (elapsed < 0) restarts the full wait rather than skipping it.
        let remaining = elapsed < 0 ? delaySeconds : delaySeconds - elapsed
        if remaining > 0 {
            let wait = Duration.milliseconds(Int64((remaining * 1000).rounded(.up)))
            throw AuthenticationError(
                .authenticationFailed,
                "too many failed passcode attempts (\(state.passcodeFailures)); try again in \(Self.describe(wait))",
                retryAfter: wait)
        }
    }

    /// Records a fingerprint that did not match; returns true when this failure locked biometry.
    @discardableResult
    package func recordBiometricFailure() throws -> Bool {
        try update { state in
            state.biometricFailures += 1
            if state.biometricFailures >= Self.biometricFailureLimit { state.biometryLocked = true }
            return state.biometryLocked
        }
    }

    /// Records a fingerprint match: clears the biometric failure count (not a lockout).
    package func recordBiometricSuccess() throws {
        if try currentState().biometricFailures == 0 { return }
        try update { state in
            if !state.biometryLocked { state.biometricFailures = 0 }
        }
    }

    /// Records a wrong passcode at the current time.
    package func recordPasscodeFailure() throws {
        let now = clock.now().timeIntervalSince1970
        try update { state in
            state.passcodeFailures += 1
            state.lastPasscodeFailure = now
        }
    }

    /// Records a passcode success: clears both counters and the biometric lockout.
    package func recordPasscodeSuccess() throws {
        if try currentState() == State() { return }
        try update { state in state = State() }
    }

    private func update<Result>(_ body: (inout State) throws -> Result) throws -> Result {
        try PrivateFiles.withExclusiveLock(on: lockPath) {
            var state = try load()
            let result = try body(&state)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try PrivateFiles.writeAtomically(try encoder.encode(state), to: path)
            return result
        }
    }

    private func load() throws -> State {
        guard let data = try PrivateFiles.read(path) else { return State() }
        do {
            return try JSONDecoder().decode(State.self, from: data)
        } catch {
            // A damaged policy file must not reset the counters to zero silently: fail closed.
            throw AuthenticationError(.invalidContext, "attempt policy file \(path) is damaged; refusing to guess")
        }
    }

    private static func describe(_ wait: Duration) -> String {
        let seconds = Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0)
        if seconds >= 120 { return "\((seconds + 59) / 60) minutes" }
        return "\(seconds) seconds"
    }
}
