package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"unicode/utf8"

	"github.com/memgate/memgate/storage"
)

// encryptFlag turns encryption at rest on. The passphrase itself is never a
// flag: it comes from the environment variable that --passphrase-env
// names (passphraseFlag), read through the app's getenv.
type encryptFlag struct {
	Encrypt bool `name:"encrypt" help:"Encrypt the stores at rest with the passphrase in the variable --passphrase-env names; an encrypted store opens only with it."`
}

func (f *encryptFlag) AfterApply(c *Config) error {
	c.encryptFlag, c.taken = *f, c.taken|takesEncrypt
	return nil
}

// passphraseFlag names the variable of the stores' passphrase.
type passphraseFlag struct {
	PassphraseEnv string `name:"passphrase-env" default:"MEMGATE_PASSPHRASE" placeholder:"VAR" help:"Environment variable that holds the passphrase of the encrypted stores (--encrypt)."`
}

func (f *passphraseFlag) AfterApply(c *Config) error {
	c.passphraseFlag, c.taken = *f, c.taken|takesPassphrase
	return nil
}

// minPassphraseChars is the shortest passphrase accepted. Argon2id slows
// guessing down; it cannot save a passphrase short enough to enumerate.
const minPassphraseChars = 8

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (f *passphraseFlag) validate(bad badFunc) {
	if !envVarName.MatchString(f.PassphraseEnv) {
		bad("passphrase-env", "must be the name of an environment variable (letters, digits and _)")
	}
}

// kdfCost is the Argon2id cost of the stores this process creates or
// rekeys; the zero value means storage.DefaultKDF. Tests lower it.
var kdfCost storage.KDFParams

// encryption returns the encryption of the configuration: nil without
// --encrypt; a usage error, naming the variable but never its value, when
// the passphrase is missing or too short.
func (a *app) encryption() (*storage.Encryption, error) {
	if !a.cfg.Encrypt {
		return nil, nil
	}
	return a.passphrase("encrypt", a.cfg.PassphraseEnv)
}

// passphrase reads the passphrase in the variable name, for flag.
func (a *app) passphrase(flag, name string) (*storage.Encryption, error) {
	p := a.getenv(name)
	switch {
	case p == "":
		return nil, usageError{fmt.Errorf("--%s: the passphrase variable %s is unset or empty", flag, name)}
	case utf8.RuneCountInString(p) < minPassphraseChars:
		return nil, usageError{fmt.Errorf("--%s: the passphrase in %s is shorter than %d characters", flag, name, minPassphraseChars)}
	}
	e, err := storage.NewEncryption(p)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s: the passphrase in %s cannot be used", flag, name)}
	}
	e.KDF = kdfCost
	// Every store of the data folder derives its keys from one Argon2id
	// run over this salt (see docs/ENCRYPTION.md).
	e.UseSaltFile(filepath.Join(a.cfg.DataDir, saltFileName))
	return e, nil
}

// saltFileName is the data folder's Argon2id salt, made with the first
// encrypted store.
const saltFileName = "kdf-salt"
