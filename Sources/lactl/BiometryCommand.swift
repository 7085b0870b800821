import ArgumentParser
import Authenticators
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer

/// `lactl biometry …`: fingerprints through libfprint.
struct Biometry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enroll, list, remove and verify fingerprints.",
        subcommands: [BiometryEnroll.self, BiometryList.self, BiometryRemove.self, BiometryVerify.self])
}

/// Options shared by the `biometry` subcommands.
struct BiometryOptions: ParsableArguments {
    @Option(help: "Where prints and attempt counters live (default: $XDG_DATA_HOME/local-authentication).")
    var stateDir: String?

    @Option(help: "The user the prints belong to (default: the current user).")
    var user: String?

    @Option(
        name: .customLong("driver"),
        help: "An acceptable libfprint driver id, most preferred first (repeatable; default: any reader).")
    var drivers: [String] = []

    @Option(help: "Seconds to wait for each scan.")
    var timeout: Int = 30

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    /// The engine's authentication contexts on the store: the same prints, attempt counters and lockout every
    /// program of the user sees.
    func contexts() throws -> AuthenticationContexts {
        let directory = URL(fileURLWithPath: stateDir ?? defaultAuthenticatorStateDirectory(), isDirectory: true)
        var authentication = AuthenticationConfiguration.fromEnvironment(
            dataDirectory: directory, presenter: AuthenticationConfiguration.defaultPresenter())
        if let user { authentication.username = user }
        if !drivers.isEmpty { authentication.readerDrivers = drivers }
        authentication.attemptTimeout = .seconds(timeout)
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: []),
            authentication: authentication)
        return client.engine.authentication!
    }

    func authenticator() throws -> BiometricAuthenticator {
        try contexts().biometric
    }
}

/// A context of `contexts` holding a passcode credential, asked for on the terminal: what changing the enrolled
/// fingerprints needs, as on Apple's devices.
func passcodeContext(_ contexts: AuthenticationContexts, reason: String) async throws -> AuthenticationContextID {
    guard let presenter = contexts.configuration.presenter else {
        throw AuthenticationError(.notInteractive, "changing fingerprints needs the passcode, and there is no terminal to ask on")
    }
    let id = try contexts.createContext()
    try await contexts.evaluate(
        .passcode, context: id, options: EvaluationOptions(prompt: EvaluationPrompt(reason: reason), presenter: presenter))
    return id
}

/// Runs `body` in a task that Ctrl-C cancels (the scan then ends with a user-visible cancel).
func cancellableOnInterrupt<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler { task.cancel() }
    source.resume()
    defer {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
    return try await task.value
}

/// `lactl biometry enroll`: scans a finger with a live stage display.
struct BiometryEnroll: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll", abstract: "Enroll a finger (replaces an earlier print of the same finger).")

    @OptionGroup var options: BiometryOptions

    @Option(help: "The finger: \(Finger.allCases.dropFirst().map(\.name).joined(separator: ", ")).")
    var finger = Finger.rightIndex.name

    func run() async throws {
        guard let finger = Finger(name: finger), finger != .unknown else {
            throw ValidationError("unknown finger '\(self.finger)'")
        }
        let contexts = try options.contexts()
        let authenticator = contexts.biometric
        do {
            let context = try await passcodeContext(contexts, reason: "Enroll a fingerprint")
            defer { contexts.discard(context) }
            let reader = try await authenticator.open()
            print("Enrolling \(finger) on \(reader.name) (\(reader.driver)): scan \(reader.enrollStages) times.")
            let info = try await cancellableOnInterrupt {
                try await contexts.enroll(finger: finger, context: context) { event in
                    switch event {
                    case .stageCompleted(let completed, let total):
                        print("  scan \(completed)/\(total) ok")
                    case .retry(let reason, let completed, let total, _):
                        print("  scan \(completed + 1)/\(total): \(reason)")
                    }
                }
            }
            await authenticator.close()
            print("Enrolled \(info.finger) as \(info.identifier).")
        } catch let error as AuthenticationError {
            await authenticator.close()
            printError(error)
            throw ExitCode(1)
        }
    }
}

/// `lactl biometry list`: the enrolled prints.
struct BiometryList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List enrolled prints.")

    @OptionGroup var options: BiometryOptions

    func run() async throws {
        let authenticator = try options.authenticator()
        let prints = try authenticator.enrolledPrints()
        if prints.isEmpty {
            print("no fingerprint enrolled")
            return
        }
        let formatter = ISO8601DateFormatter()
        for print in prints {
            Swift.print(
                "\(print.identifier)  \(print.finger.name.padding(toLength: 12, withPad: " ", startingAt: 0))  "
                    + "\(print.driver)/\(print.deviceID)  \(formatter.string(from: print.enrolledAt))")
        }
        if let hash = try authenticator.stateHash() {
            Swift.print("state hash: \(hash.map { String(format: "%02x", $0) }.joined())")
        }
    }
}

/// `lactl biometry remove <id>`: deletes an enrolled print.
struct BiometryRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an enrolled print.")

    @OptionGroup var options: BiometryOptions

    @Argument(help: "The print's identifier, as `lactl biometry list` shows it.")
    var identifier: String

    func validate() throws {
        guard (try? PrintIdentifier(hex: identifier)) != nil else {
            throw ValidationError("'\(identifier)' is not a print identifier (32 hex digits, see `lactl biometry list`)")
        }
    }

    func run() async throws {
        let identifier = try PrintIdentifier(hex: identifier)
        let contexts = try options.contexts()
        let authenticator = contexts.biometric
        do {
            let context = try await passcodeContext(contexts, reason: "Remove a fingerprint")
            defer { contexts.discard(context) }
            try await contexts.removePrint(identifier, context: context)
            await authenticator.close()
            print("removed \(identifier)")
        } catch let error as AuthenticationError {
            await authenticator.close()
            printError(error)
            throw ExitCode(1)
        }
    }
}

/// `lactl biometry verify`: waits for a finger and checks it.
struct BiometryVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Scan a finger and check it against the enrolled prints.")

    @OptionGroup var options: BiometryOptions

    func run() async throws {
        let authenticator = try options.authenticator()
        do {
            let matched = try await cancellableOnInterrupt {
                try await authenticator.verify { event in
                    switch event {
                    case .waitingForFinger: print("Place your finger on the reader.")
                    case .retry(let reason, _): print("  \(reason)")
                    }
                }
            }
            await authenticator.close()
            print("match: \(matched.finger) (\(matched.identifier))")
        } catch let error as AuthenticationError {
            await authenticator.close()
            printError(error)
            throw ExitCode(1)
        }
    }
}
