import ArgumentParser
import Foundation
import SecretService

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl secret-service`: the freedesktop Secret Service over the keychain, for the programs that speak it.
struct SecretServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret-service",
        abstract: "Serve the keychain to secret-tool, libsecret and Python's keyring (org.freedesktop.secrets).",
        discussion: """
            Owns org.freedesktop.secrets on your session bus (DBUS_SESSION_BUS_ADDRESS) and serves the Secret \
            Service API over the keychain: the login collection (alias default) keeps its items in the keychain, \
            the session collection in this process's memory only. Secrets travel in plain or \
            dh-ietf1024-sha256-aes128-cbc-pkcs7 sessions. An item is a generic password whose service is \
            org.freedesktop.Secret/login, its account the item's id, its label the item's label and its generic \
            attribute the item's attributes as JSON: lactl keychain dump lists it. Each call is made on behalf of \
            the calling program, identified as localauthd identifies every caller (embedded mode keeps no program \
            from another): a new item trusts the program that made it, and any \
            other program's use of its secret (lactl keychain's too) asks you through the prompt agent, or is \
            refused (AccessDenied) where no agent can ask. When another program owns the name, it is named and \
            lactl stops, unless --replace takes the name over (where the owner allows it).
            """)

    @OptionGroup var keychain: KeychainOptions

    @Flag(help: "Take org.freedesktop.secrets over from the program that owns it (where it allows that).")
    var replace = false

    @Option(help: "The bus to serve on (default: $DBUS_SESSION_BUS_ADDRESS).")
    var bus: String?

    func run() throws {
        let provider: SecretServiceProvider
        do {
            provider = try SecretServiceProvider(address: bus, replace: replace) { line in
                FileHandle.standardError.write(Data("lactl secret-service: \(line)\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("lactl secret-service: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let ended = try keychain.run { provider.serve() }
        FileHandle.standardError.write(Data("lactl secret-service: stopped: \(ended)\n".utf8))
    }
}
