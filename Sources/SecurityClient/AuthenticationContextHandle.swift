import SecurityProtocol
import SecurityServer

/// An object that stands for an engine-side authentication context: `LAContext`, as passed in
/// `kSecUseAuthenticationContext`. The keychain functions ask it for the handle to send with a request.
package protocol AuthenticationContextHandle: AnyObject, Sendable {
    /// The context's handle, creating the engine-side context on first use and bringing its prompt settings
    /// (presenter, reason, interaction rule) up to date.
    ///
    /// - Throws: `AuthenticationError` (`invalidContext`) when the context cannot be created.
    func authenticationContextID() throws -> AuthenticationContextID
}
