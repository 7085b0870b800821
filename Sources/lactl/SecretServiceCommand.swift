import ArgumentParser
import Foundation
import SecretService

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl secret-service`: the freedesktop Secret Service over the keychain, for the programs that speak it; `serve`
/// (the default) and `import`.
struct SecretServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret-service",
        abstract: "Serve the keychain to secret-tool, libsecret and Python's keyring (org.freedesktop.secrets).",
        subcommands: [SecretServiceServe.self, SecretServiceImportCommand.self],
        defaultSubcommand: SecretServiceServe.self)
}

struct SecretServiceServe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the keychain as org.freedesktop.secrets on your session bus (the default).",
        discussion: """
            Owns org.freedesktop.secrets on your session bus (DBUS_SESSION_BUS_ADDRESS) and serves the Secret \
            Service API over the keychain: the login collection (alias default) and those made with \
            CreateCollection keep their items in the keychain, the session collection in this process's memory \
            only. Secrets travel in plain or \
            dh-ietf1024-sha256-aes128-cbc-pkcs7 sessions. An item is a generic password whose service is \
            org.freedesktop.Secret/login, its account the item's id, its label the item's label and its generic \
            attribute the item's attributes as JSON: lactl keychain dump lists it. Each call is made on behalf of \
            the calling program, identified as localauthd identifies every caller (embedded mode keeps no program \
            from another): a new item trusts the program that made it, and any \
            other program's use of its secret (lactl keychain's too) asks you through the prompt agent, or is \
            refused (AccessDenied) where no agent can ask. Every collection but session locks with the keychain; Unlock \
            asks for your passcode through the prompt agent. When another program owns the name, it is named and \
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

struct SecretServiceImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Copy every item of the running Secret Service provider (gnome-keyring, KWallet, KeePassXC) into "
            + "the keychain.",
        discussion: """
            Run it while the other provider still owns org.freedesktop.secrets, before lactl secret-service takes \
            the name over. Every item of every unlocked collection becomes an item of the login collection, with \
            its label, attributes, content type and secret; its keychain comment names where it came from, so a \
            second run copies only what the first did not. A locked collection is left alone and named: unlock it \
            and run import again. Imported items may be used by every program of yours, as under the provider \
            they come from, unless --ask-each-program: then each program's first use asks you through the prompt \
            agent. Nothing is changed or removed in the other provider.
            """)

    @OptionGroup var keychain: KeychainOptions

    @Option(help: "The bus of the provider (default: $DBUS_SESSION_BUS_ADDRESS).")
    var bus: String?

    @Flag(help: "Every program's first use of an imported secret asks you (an empty trusted-application list).")
    var askEachProgram = false

    func run() throws {
        let outcome: SecretServiceImport.Outcome
        do {
            outcome = try keychain.run { try SecretServiceImport.run(address: bus, trustingNoProgram: askEachProgram) }
        } catch {
            FileHandle.standardError.write(Data("lactl secret-service import: \(error)\n".utf8))
            throw ExitCode(1)
        }
        print("imported \(outcome.imported) items from \(outcome.source); \(outcome.alreadyThere) were there already")
        for (label, items) in outcome.locked {
            print("left alone, locked: \(label)\(items.map { " (\($0) items)" } ?? ""): unlock it and run import again")
        }
        for item in outcome.unreadable { print("not imported: \(item)") }
        if !outcome.locked.isEmpty || !outcome.unreadable.isEmpty { throw ExitCode(2) }
    }
}
