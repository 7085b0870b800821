import Foundation
import SecureCrypto
import SecurityProtocol

@testable import Authenticators

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh private temporary directory, removed by `remove()`. Short paths: Unix socket paths must fit 108 bytes.
struct TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/la-auth-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw VirtualReaderSocket.Failure(description: "mkdtemp: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A clock the test moves by hand.
final class TestClock: AttemptClock, @unchecked Sendable {
    // Safe to share: `current` is only read or written under `lock`.
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = start
    }

    func now() -> Date { lock.withLock { current } }

    func sinceBoot() -> TimeInterval { lock.withLock { current.timeIntervalSince1970 - 1_700_000_000 } }

    func advance(by seconds: TimeInterval) {
        lock.withLock { current += seconds }
    }
}

/// A presenter that answers prompts from a script (nil = cancel) and records what PAM asked and said.
final class ScriptedPresenter: PasscodePresenter, @unchecked Sendable {
    // Safe to share: all state is only touched under `lock`.
    private let lock = NSLock()
    private var answers: [String?]
    private var prompts: [PasscodePrompt] = []
    private var messages: [PasscodeMessage] = []

    init(answers: [String?]) {
        self.answers = answers
    }

    convenience init(passcode: String) {
        self.init(answers: [passcode])
    }

    func answer(_ prompt: PasscodePrompt) -> SecureBytes? {
        lock.withLock {
            prompts.append(prompt)
            guard !answers.isEmpty, let answer = answers.removeFirst() else { return nil }
            return SecureBytes(Array(answer.utf8))
        }
    }

    func show(_ message: PasscodeMessage) {
        lock.withLock { messages.append(message) }
    }

    var askedPrompts: [PasscodePrompt] { lock.withLock { prompts } }
    var shownMessages: [PasscodeMessage] { lock.withLock { messages } }
}

/// Collects progress events reported from the libfprint thread.
final class EventLog<Event: Sendable>: @unchecked Sendable {
    // Safe to share: `storage` is only touched under `lock`.
    private let lock = NSLock()
    private var storage: [Event] = []

    func append(_ event: Event) { lock.withLock { storage.append(event) } }
    var events: [Event] { lock.withLock { storage } }
}

/// A PAM configuration directory with a pam_matrix service and its passdb, written by the test.
struct MatrixPAM {
    static let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"
    static let service = "la-test"

    let directory: TemporaryDirectory

    /// Service `la-test` (auth with `verbose`, so PAM sends messages with a NULL response pointer) and users
    /// alice/secret (allowed) and bob/hunter2 (allowed only for another service).
    init() throws {
        directory = try TemporaryDirectory()
        let passdb = directory.path + "/passdb"
        // No blank lines: pam_matrix crashes on them.
        try "alice:secret:\(Self.service)\nbob:hunter2:other\n".write(toFile: passdb, atomically: true, encoding: .utf8)
        let serviceFile = """
            auth     required  \(Self.module) passdb=\(passdb) verbose
            account  required  \(Self.module) passdb=\(passdb)

            """
        try serviceFile.write(toFile: directory.path + "/" + Self.service, atomically: true, encoding: .utf8)
    }

    var configuration: PasscodeAuthenticator.Configuration {
        PasscodeAuthenticator.Configuration(service: Self.service, configurationDirectory: directory.path)
    }

    func remove() { directory.remove() }
}

/// Measures how long `body` takes.
func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Duration) {
    let start = ContinuousClock.now
    let value = try await body()
    return (value, ContinuousClock.now - start)
}

/// The error `body` throws as an ``AuthenticationError``, or nil when it succeeds or throws something else.
func authenticationError(_ body: () async throws -> some Any) async -> AuthenticationError? {
    do {
        _ = try await body()
        return nil
    } catch let error as AuthenticationError {
        return error
    } catch {
        return nil
    }
}
