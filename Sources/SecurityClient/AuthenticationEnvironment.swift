import Authenticators
import Foundation
import SecurityServer

extension AuthenticationConfiguration {
    /// The configuration from the environment, for real use:
    /// - state (attempt counters, encrypted prints): the keychain's data directory (`dataDirectory`, by default
    ///   `EmbeddedConfiguration.defaultDataDirectory()`: `$LA_DATA_DIR`, `$XDG_DATA_HOME/local-authentication` or
    ///   `~/.local/share/local-authentication`);
    /// - PAM: service `$LA_PAM_SERVICE` (default `local-authentication`), configuration directory `$LA_PAM_CONFDIR`
    ///   (default `/etc/pam.d`);
    /// - readers: `$LA_READER_DRIVERS` (comma-separated libfprint driver ids; default any reader);
    /// - user: the process's user.
    package static func fromEnvironment(
        dataDirectory: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> AuthenticationConfiguration {
        let directory = dataDirectory ?? EmbeddedConfiguration.defaultDataDirectory(environment)
        let service = environment["LA_PAM_SERVICE"].flatMap { $0.isEmpty ? nil : $0 } ?? "local-authentication"
        let confdir = environment["LA_PAM_CONFDIR"].flatMap { $0.isEmpty ? nil : $0 }
        let drivers = environment["LA_READER_DRIVERS"].map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        return AuthenticationConfiguration(
            stateDirectory: directory.path, username: currentUsername(),
            passcode: PasscodeAuthenticator.Configuration(service: service, configurationDirectory: confdir),
            readerDrivers: drivers?.isEmpty == false ? drivers : nil)
    }
}
