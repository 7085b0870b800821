import Authenticators
import Foundation
import StoreFiles

/// How the engine authenticates: where the authenticators keep state, which PAM service and fingerprint readers it
/// uses, and whose credentials they check. Who draws prompts is the client's
/// business: the engine sends them as messages (``PromptChannel``).
package struct AuthenticationConfiguration: Sendable {
    /// The directory with the attempt policy and the encrypted prints (the keychain's data directory by default).
    package var stateDirectory: String
    /// The user whose passcode and fingerprints are checked.
    package var username: String
    /// The PAM service and its configuration directory.
    package var passcode: PasscodeAuthenticator.Configuration
    /// Acceptable libfprint driver ids, most preferred first; nil = any reader.
    package var readerDrivers: [String]?
    /// How long one fingerprint scan may take.
    package var attemptTimeout: Duration
    /// The clock of credentials and reuse windows; tests move it by hand.
    package var clock: any AttemptClock

    /// A configuration for `username` with state in `stateDirectory`.
    package init(
        stateDirectory: String, username: String,
        passcode: PasscodeAuthenticator.Configuration = PasscodeAuthenticator.Configuration(),
        readerDrivers: [String]? = nil, attemptTimeout: Duration = .seconds(30),
        clock: any AttemptClock = SystemAttemptClock()
    ) {
        self.stateDirectory = stateDirectory
        self.username = username
        self.passcode = passcode
        self.readerDrivers = readerDrivers
        self.attemptTimeout = attemptTimeout
        self.clock = clock
    }

    /// The name of the user running this process (`getpwuid(geteuid())`, else `$USER`).
    package static func currentUsername() -> String {
        DataLocations.currentUserName() ?? ProcessInfo.processInfo.environment["USER"] ?? "root"
    }
}
