import Foundation
import SecurityProtocol
import StoreFiles

/// Where authenticator state lives by default: `$LA_DATA_DIR`, else `$XDG_DATA_HOME/local-authentication`, else
/// `~/.local/share/local-authentication`, as the architecture's embedded mode lays out.
package func defaultAuthenticatorStateDirectory() -> String {
    let environment = ProcessInfo.processInfo.environment
    // The same directory the keychain engine uses, so `lactl biometry` and the engine see the same prints.
    if let directory = environment["LA_DATA_DIR"], !directory.isEmpty {
        return directory
    }
    if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
        return data + "/local-authentication"
    }
    let home = environment["HOME"] ?? NSHomeDirectory()
    return home + "/.local/share/local-authentication"
}

extension AuthenticationError {
    /// A store file that cannot be created, read, written or trusted: the state cannot be read (`invalidContext`).
    package init(_ failure: PrivateFileError) {
        self.init(
            .invalidContext, failure.message,
            backendStatus: failure.errno.map { .init(library: "system", code: Int($0)) })
    }
}

/// Runs `body`, reporting a store-file failure as an ``AuthenticationError``.
func withStateFiles<Result: ~Copyable>(_ body: () throws -> Result) throws -> Result {
    do {
        return try body()
    } catch let failure as PrivateFileError {
        throw AuthenticationError(failure)
    }
}
