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
    /// Who owns the reader and the prints: this process through libfprint, or fprintd.
    package var biometryBackend: BiometricAuthenticator.Configuration.Backend = .libfprint
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

extension AuthenticationConfiguration {
    /// The configuration from the environment, for real use:
    /// - state (attempt counters, encrypted prints): the keychain's data directory `dataDirectory`;
    /// - PAM: service `$LA_PAM_SERVICE` (default `local-authentication`), configuration directory `$LA_PAM_CONFDIR`
    ///   (default `/etc/pam.d`);
    /// - readers: `$LA_READER_DRIVERS` (comma-separated libfprint driver ids; default any reader), and who owns them
    ///   (``biometryBackend(_:)``: `$LA_BIOMETRY_BACKEND`);
    /// - user: `username`, by default the process's user.
    package static func fromEnvironment(
        dataDirectory directory: URL, username: String = currentUsername(),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> AuthenticationConfiguration {
        let service = environment["LA_PAM_SERVICE"].flatMap { $0.isEmpty ? nil : $0 } ?? "local-authentication"
        let confdir = environment["LA_PAM_CONFDIR"].flatMap { $0.isEmpty ? nil : $0 }
        let drivers = environment["LA_READER_DRIVERS"].map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        var configuration = AuthenticationConfiguration(
            stateDirectory: directory.path, username: username,
            passcode: PasscodeAuthenticator.Configuration(service: service, configurationDirectory: confdir),
            readerDrivers: drivers?.isEmpty == false ? drivers : nil)
        configuration.biometryBackend = biometryBackend(environment)
        return configuration
    }

    /// The fingerprint backend `$LA_BIOMETRY_BACKEND` names: `libfprint`, `fprintd`, or `auto` (the default): fprintd
    /// when its name is on the system bus (or can be started there), else libfprint — except while libfprint's
    /// virtual reader is configured (`FP_VIRTUAL_DEVICE`), which only this process can drive. fprintd is reached on
    /// `$LA_FPRINTD_BUS` (a D-Bus address; default the system bus) and its prints are read under
    /// `$LA_FPRINTD_PRINTS` (default `/var/lib/fprint`, fprintd's store) for the enrolled set's state hash.
    package static func biometryBackend(
        _ environment: [String: String]
    ) -> BiometricAuthenticator.Configuration.Backend {
        let address = environment["LA_FPRINTD_BUS"].flatMap { $0.isEmpty ? nil : $0 }
        let fprintd = BiometricAuthenticator.Configuration.Backend.fprintd(
            address: address,
            printDirectory: environment["LA_FPRINTD_PRINTS"].flatMap { $0.isEmpty ? nil : $0 }
                ?? BiometricAuthenticator.Configuration.Backend.fprintdPrintDirectory)
        switch environment["LA_BIOMETRY_BACKEND"]?.lowercased() {
        case "libfprint": return .libfprint
        case "fprintd": return fprintd
        default:
            if environment["FP_VIRTUAL_DEVICE"]?.isEmpty == false { return .libfprint }
            let present = BiometricAuthenticator.Configuration.Backend.fprintdIsPresent(address: address)
            return present ? fprintd : .libfprint
        }
    }
}
