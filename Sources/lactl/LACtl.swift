import ArgumentParser

/// `lactl`: LocalAuthentication and Keychain Services for people, named after macOS `security` where it can be.
@main
struct LACtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lactl",
        abstract: "Manage the local-authentication keychain, fingerprints, passcodes and rights.",
        version: "0.1.0",
        subcommands: [Biometry.self, Passcode.self, KeychainCommand.self])
}
