import Foundation
import SecureCrypto
import SecurityProtocol
import StoreFiles
import Synchronization

/// A source of wall-clock time for the attempt policy; tests inject one they can move forward.
///
/// Wall-clock time (not a monotonic clock) because the policy's timestamps are persisted and must stay meaningful
/// after the process or the machine restarts.
package protocol AttemptClock: Sendable {
    /// The current time.
    func now() -> Date
    /// Seconds since the machine booted, counting suspend, on a clock nobody can set (`CLOCK_BOOTTIME`): what the
    /// windows that guard secrets run on (the fingerprint unlock, reuse windows), so that stepping the wall clock
    /// back never stretches them. Not persisted: it starts again at every boot.
    func sinceBoot() -> TimeInterval
}

/// The system's real-time clock.
package struct SystemAttemptClock: AttemptClock {
    /// The system clock.
    package init() {}
    /// `Date()`.
    package func now() -> Date { Date() }
    /// `CLOCK_BOOTTIME`.
    package func sinceBoot() -> TimeInterval {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return TimeInterval(time.tv_sec) + TimeInterval(time.tv_nsec) / 1e9
    }
}

/// Which authenticator an attempt belongs to.
package enum AttemptMethod: String, Sendable {
    case biometric
    case passcode
}

/// How an attempt ended, for the policy's counters.
package enum AttemptOutcome: Sendable {
    /// The credential matched.
    case success
    /// The credential was presented and did not match: it counts.
    case failure
    /// Nothing was presented (cancelled, timed out, reader gone, PAM misconfigured): it does not count.
    case notAttempted
}

/// How many failed attempts each method has had, and what that forbids; persisted in a 0600 file, authenticated
/// under a key of the store, so killing the process, editing the file or deleting it never resets the counters.
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
/// Attempts are reserved before they run (``withAttempt(_:isCancelled:_:)``): one attempt per method at a time per
/// state directory (an exclusive lock held for the whole attempt, across processes), and under the state lock the
/// limit is checked and the attempt counted as a failure in one step; a success clears the count afterwards, an
/// attempt where nothing was presented gives it back. So concurrent evaluations can never bring more attempts to PAM
/// or the matcher than the limits allow, and a crash in the middle of an attempt leaves it counted.
///
/// Writes are in place and not flushed to disk: a process killed mid-attempt leaves the attempt counted; a power loss
/// may lose the last change (one attempt per machine stop), and a torn record reads as locked out.
///
/// The file carries a sequence number and an HMAC-SHA256 under the store's attempt key. A file that does not
/// authenticate, a missing file where one must exist, and (within one process) a file older than one already seen,
/// all read as **locked out** — biometry locked, the passcode at the longest wait — never as fresh; the locked-out
/// state is written back so the wait is counted from that moment. Rolling the whole store directory back to an
/// earlier copy is not detected in embedded mode (nothing outside the directory remembers the sequence number).
///
/// The same file keeps the enrollment generation: a counter raised before every enrollment change and mixed into the
/// enrolled-set state hash, so restoring saved print files never brings an earlier hash back.
package final class AttemptPolicy: Sendable {
    /// The persisted counters.
    package struct State: Codable, Equatable, Sendable {
        /// Consecutive biometric no-match results since the last success (attempts in progress included).
        package var biometricFailures = 0
        /// Whether biometry is locked until a passcode success.
        package var biometryLocked = false
        /// Consecutive passcode failures since the last success (attempts in progress included).
        package var passcodeFailures = 0
        /// When the last passcode failure happened (seconds since 1970).
        package var lastPasscodeFailure: Double?
        /// Raised before every enrollment change; part of the enrolled-set state hash.
        package var enrollmentGeneration: UInt64 = 0

        /// No failures, not locked.
        package init() {}
    }

    /// What the file holds besides its MAC: the state and a sequence number raised on every write.
    private struct Body {
        var sequence: UInt64
        var state: State
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

    /// The file name of the state, inside the state directory.
    package static let fileName = "attempts.state"
    /// The file the counters were kept in, as plain JSON, before they were authenticated.
    static let legacyFileName = "attempts.json"

    private let directory: String
    private let path: String
    private let lockPath: String
    private let clock: any AttemptClock
    private let mac: HMACSHA256.Key
    /// The highest sequence number this instance has read or written: an older file is a rollback.
    private let highestSequence = Mutex<UInt64>(0)

    /// A policy in `directory/attempts.state`, authenticated under `integrityKey` (32 bytes the caller keeps
    /// secret: the engine derives it from its keybag).
    ///
    /// - Parameter mayStartFresh: whether a missing file means "no failures yet" (true only when the key itself was
    ///   made just now, so no earlier state can have existed); otherwise a missing file reads as locked out.
    package init(
        directory: String, integrityKey: SecureBytes, mayStartFresh: Bool,
        clock: any AttemptClock = SystemAttemptClock()
    ) throws {
        try withStateFiles { try PrivateFiles.ensureDirectory(directory) }
        self.directory = directory
        self.path = directory + "/" + Self.fileName
        self.lockPath = directory + "/attempts.lock"
        self.clock = clock
        self.mac = HMACSHA256.Key(integrityKey)
        if mayStartFresh {
            try withStateFiles {
                try PrivateFiles.withExclusiveLock(on: lockPath) {
                    if PrivateFiles.exists(path) { return }
                    // A file from before the state was authenticated: carry its counters over, once.
                    let legacyPath = directory + "/" + Self.legacyFileName
                    if let data = try PrivateFiles.read(legacyPath) {
                        try save(Self.legacyState(data) ?? lockedOutState(), sequence: 1)
                        try PrivateFiles.remove(legacyPath)
                        return
                    }
                    try save(State(), sequence: 1)
                }
            }
        }
    }

    /// A stand-alone policy (no keychain beside it): its key is `directory/attempts.key`, made on first use, and
    /// the state starts fresh only when that key is made. Deleting both files together resets it, which the
    /// engine's policy (keyed by the keybag) does not allow.
    package convenience init(directory: String, clock: any AttemptClock = SystemAttemptClock()) throws {
        try withStateFiles { try PrivateFiles.ensureDirectory(directory) }
        let keyPath = directory + "/attempts.key"
        let (key, created) = try withStateFiles {
            try PrivateFiles.withExclusiveLock(on: directory + "/attempts.lock") {
                if let key = try PrivateFiles.readSecret(keyPath, expectedCount: 32) { return (key, false) }
                return (try PrivateFiles.loadOrCreateKey(at: keyPath), true)
            }
        }
        try self.init(directory: directory, integrityKey: key, mayStartFresh: created, clock: clock)
    }

    /// The counters as currently stored (a damaged or missing file reads as locked out, and is rewritten so).
    package func currentState() throws -> State {
        try withStateLock { try load() }
    }

    /// Throws `biometryLockout` when biometry is locked. An early check; ``withAttempt(_:isCancelled:_:)`` decides.
    package func checkBiometryAllowed() throws {
        try Self.requireBiometryAllowed(try currentState())
    }

    /// Throws `authenticationFailed` with ``AuthenticationError/retryAfter`` while a passcode wait is running. An
    /// early check; ``withAttempt(_:isCancelled:_:)`` decides.
    package func checkPasscodeAllowed() throws {
        try requirePasscodeAllowed(try currentState())
    }

    /// Runs one attempt of `method`: waits until no other attempt of that method runs on this state directory
    /// (polling `isCancelled`), reserves it (throws the lockout or the wait when the limit is reached, without
    /// running `body`), runs `body`, and settles the counters by the outcome `body` reports. An error thrown by
    /// `body` gives the reservation back and is rethrown.
    ///
    /// Blocks its thread: call it on the authenticator's dedicated thread.
    package func withAttempt<Result>(
        _ method: AttemptMethod, isCancelled: () -> Bool, _ body: () throws -> (Result, AttemptOutcome)
    ) throws -> Result {
        let attemptLock = try waitForAttemptLock(method, isCancelled: isCancelled)
        do {
            let reservation = try reserve(method)
            let result: Result
            let outcome: AttemptOutcome
            do {
                (result, outcome) = try body()
            } catch {
                try? settle(reservation, .notAttempted)
                throw error
            }
            try settle(reservation, outcome)
            attemptLock.unlock()
            return result
        } catch {
            attemptLock.unlock()
            throw error
        }
    }

    /// The lock that lets one attempt of `method` run at a time on this state directory.
    private func waitForAttemptLock(_ method: AttemptMethod, isCancelled: () -> Bool) throws -> FileLock {
        let path = directory + "/\(method.rawValue).attempt.lock"
        while true {
            if let lock = try withStateFiles({ try FileLock.attempt(path: path) }) { return lock }
            if isCancelled() { throw AuthenticationError(.appCancel, "the evaluation was cancelled by the app") }
            usleep(20_000)
        }
    }

    /// What a reservation changed, so giving it back restores exactly that.
    private struct Reservation {
        var method: AttemptMethod
        var previousLastFailure: Double?
        var reservedAt: Double
    }

    private func reserve(_ method: AttemptMethod) throws -> Reservation {
        let now = clock.now().timeIntervalSince1970
        return try update { state in
            switch method {
            case .biometric:
                try Self.requireBiometryAllowed(state)
                state.biometricFailures += 1
                return Reservation(method: method, previousLastFailure: nil, reservedAt: now)
            case .passcode:
                try requirePasscodeAllowed(state)
                let reservation = Reservation(
                    method: method, previousLastFailure: state.lastPasscodeFailure, reservedAt: now)
                state.passcodeFailures += 1
                state.lastPasscodeFailure = now
                return reservation
            }
        }
    }

    private func settle(_ reservation: Reservation, _ outcome: AttemptOutcome) throws {
        let now = clock.now().timeIntervalSince1970
        try update { state in
            switch (reservation.method, outcome) {
            case (.biometric, .success):
                if !state.biometryLocked { state.biometricFailures = 0 }
            case (.biometric, .failure):
                if state.biometricFailures >= Self.biometricFailureLimit { state.biometryLocked = true }
            case (.biometric, .notAttempted):
                state.biometricFailures = max(0, state.biometricFailures - 1)
            case (.passcode, .success):
                state.clearCounters()
            case (.passcode, .failure):
                state.lastPasscodeFailure = now
            case (.passcode, .notAttempted):
                state.passcodeFailures = max(0, state.passcodeFailures - 1)
                if state.lastPasscodeFailure == reservation.reservedAt {
                    state.lastPasscodeFailure = reservation.previousLastFailure
                }
            }
        }
    }

    /// Counts a wrong passcode at the current time, outside any attempt (tests and imports of earlier state).
    package func recordPasscodeFailure() throws {
        let now = clock.now().timeIntervalSince1970
        try update { state in
            state.passcodeFailures += 1
            state.lastPasscodeFailure = now
        }
    }

    /// The current enrollment generation.
    package func enrollmentGeneration() throws -> UInt64 {
        try currentState().enrollmentGeneration
    }

    /// Raises the enrollment generation; call it before an enrollment change touches any print.
    package func advanceEnrollmentGeneration() throws {
        try update { state in state.enrollmentGeneration &+= 1 }
    }

    private static func requireBiometryAllowed(_ state: State) throws {
        if state.biometryLocked || state.biometricFailures >= biometricFailureLimit {
            throw AuthenticationError(
                .biometryLockout,
                "fingerprint locked after \(biometricFailureLimit) failed attempts; authenticate with the passcode")
        }
    }

    private func requirePasscodeAllowed(_ state: State) throws {
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

    // MARK: The file

    private func withStateLock<Result>(_ body: () throws -> Result) throws -> Result {
        try withStateFiles { try PrivateFiles.withExclusiveLock(on: lockPath, body) }
    }

    private func update<Result>(_ body: (inout State) throws -> Result) throws -> Result {
        try withStateLock {
            var state = try load()
            let result = try body(&state)
            try save(state, sequence: highestSequence.withLock { $0 } + 1)
            return result
        }
    }

    /// Reads and authenticates the file; anything but a genuine, current file is replaced by the locked-out state.
    private func load() throws -> State {
        if let data = try PrivateFiles.read(path), let body = authenticated(data) {
            let rolledBack = highestSequence.withLock { highest in
                if body.sequence < highest { return true }
                highest = body.sequence
                return false
            }
            if !rolledBack { return body.state }
        }
        // Missing, edited, from another store, or older than one already seen: fail closed.
        let lockedOut = lockedOutState()
        try save(lockedOut, sequence: highestSequence.withLock { $0 } + 1)
        return lockedOut
    }

    // File layout: "LAAT", version 1, then big-endian: sequence (8), biometric failures (4), locked (1), passcode
    // failures (4), whether a last failure is recorded (1), its time as the bits of a Double (8), enrollment
    // generation (8); then HMAC-SHA256 of everything before it (32). Binary, so an attempt pays no JSON coding.
    private static let magic: [UInt8] = Array("LAAT".utf8) + [1]
    private static let bodyByteCount = magic.count + 34

    private func authenticated(_ data: Data) -> Body? {
        let bytes = [UInt8](data)
        guard bytes.count == Self.bodyByteCount + 32, Array(bytes[0..<Self.magic.count]) == Self.magic else {
            return nil
        }
        let body = Data(bytes[0..<Self.bodyByteCount])
        guard constantTimeEqual(mac.authenticationCode(for: body), Data(bytes[Self.bodyByteCount...])) else {
            return nil
        }
        var offset = Self.magic.count
        func integer<T: FixedWidthInteger>(_: T.Type) -> T {
            defer { offset += MemoryLayout<T>.size }
            return bytes[offset..<offset + MemoryLayout<T>.size].reduce(T.zero) { $0 << 8 | T($1) }
        }
        let sequence = integer(UInt64.self)
        var state = State()
        state.biometricFailures = Int(integer(UInt32.self))
        state.biometryLocked = integer(UInt8.self) != 0
        state.passcodeFailures = Int(integer(UInt32.self))
        let hasLast = integer(UInt8.self) != 0
        let last = Double(bitPattern: integer(UInt64.self))
        state.lastPasscodeFailure = hasLast ? last : nil
        state.enrollmentGeneration = integer(UInt64.self)
        return Body(sequence: sequence, state: state)
    }

    private func save(_ state: State, sequence: UInt64) throws {
        var bytes = Self.magic
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { bytes += $0 } }
        append(sequence)
        append(UInt32(clamping: state.biometricFailures))
        append(UInt8(state.biometryLocked ? 1 : 0))
        append(UInt32(clamping: state.passcodeFailures))
        append(UInt8(state.lastPasscodeFailure == nil ? 0 : 1))
        append((state.lastPasscodeFailure ?? 0).bitPattern)
        append(state.enrollmentGeneration)
        let body = Data(bytes)
        // In place and not flushed: a killed process never loses a count, which is the attack that matters (kill the
        // evaluation once the scan is known to fail), and an attempt costs no rename or disk flush. A power loss may
        // lose the last change (at most one attempt per machine stop); a torn record fails its MAC: locked out.
        try PrivateFiles.overwrite(body + mac.authenticationCode(for: body), at: path)
        highestSequence.withLock { $0 = max($0, sequence) }
    }

    /// Biometry locked, the passcode at the longest wait from now, and an enrollment generation never used before
    /// (the true one is unknown, so every `biometryCurrentSet` binding is retired rather than possibly revived).
    private func lockedOutState() -> State {
        var state = State()
        state.biometricFailures = Self.biometricFailureLimit
        state.biometryLocked = true
        state.passcodeFailures = 9
        state.lastPasscodeFailure = clock.now().timeIntervalSince1970
        state.enrollmentGeneration = UInt64.random(in: 1 << 40...1 << 62)
        return state
    }

    /// The counters of a file written before the state was authenticated (plain JSON of the four counters).
    private static func legacyState(_ data: Data) -> State? {
        struct Legacy: Decodable {
            var biometricFailures: Int
            var biometryLocked: Bool
            var passcodeFailures: Int
            var lastPasscodeFailure: Double?
        }
        guard let legacy = try? JSONDecoder().decode(Legacy.self, from: data) else { return nil }
        var state = State()
        state.biometricFailures = legacy.biometricFailures
        state.biometryLocked = legacy.biometryLocked
        state.passcodeFailures = legacy.passcodeFailures
        state.lastPasscodeFailure = legacy.lastPasscodeFailure
        return state
    }

    private static func describe(_ wait: Duration) -> String {
        let seconds = Int(wait.components.seconds) + (wait.components.attoseconds > 0 ? 1 : 0)
        if seconds >= 120 { return "\((seconds + 59) / 60) minutes" }
        return "\(seconds) seconds"
    }
}

extension AttemptPolicy.State {
    /// Clears both counters and the lockout; the enrollment generation stays.
    mutating func clearCounters() {
        let generation = enrollmentGeneration
        self = .init()
        enrollmentGeneration = generation
    }
}

private func constantTimeEqual(_ a: Data, _ b: Data) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for (x, y) in zip(a, b) { difference |= x ^ y }
    return difference == 0
}
