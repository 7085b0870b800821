import ArgumentParser
import Foundation
import Logging

/// `lactl`: LocalAuthentication and Keychain Services for people, named after macOS `security` where it can be.
@main
struct LACtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lactl",
        abstract: "Manage the local-authentication keychain, fingerprints, passcodes and rights.",
        version: "0.1.0",
        subcommands: [
            Demo.self, Status.self, WhoAmI.self, Biometry.self, Passcode.self, KeychainCommand.self, Rights.self,
            SSHKeys.self, SSHAgentCommand.self, PromptAgentCommand.self, SecretServiceCommand.self, FIDOCommand.self,
            Keys.self, Apps.self,
        ])

    /// Logs go to standard error at `warning` and above; `LACTL_LOG_LEVEL=info` (or `debug`, `trace`) shows more.
    static func main() async {
        let level = ProcessInfo.processInfo.environment["LACTL_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level ?? .warning
            return handler
        }
        await main(nil)
    }
}

extension Data {
    /// The bytes in lower-case hexadecimal, as lactl prints hashes and digests.
    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
