package manager

import (
	"flag"
	"fmt"
	"strings"
)

// EnvPrefix starts the environment form of every manager flag.
const EnvPrefix = "ML_OPERATOR_"

// EnvName is the environment variable that sets the manager flag name:
// ML_OPERATOR_ and the flag's name in upper case with dashes as
// underscores (--gpu-node-selector is ML_OPERATOR_GPU_NODE_SELECTOR). It is
// the one place the mapping is spelled; the docs table and the tests use it.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets every flag of fs that the command line did not set from its
// environment form (EnvName), when lookup finds it: a flag on the command
// line wins over the environment, which wins over the default. Call it
// after fs.Parse. Under OLM, Subscription.spec.config.env reaches the
// manager this way (docs/operations.md). A bad value is an error naming the
// variable, the flag and the rule.
func ApplyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if onCommandLine[f.Name] {
			return
		}
		value, ok := lookup(EnvName(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, value); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q (the environment form of --%s): %v", EnvName(f.Name), value, f.Name, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid manager environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ParseArgs builds the manager's options from its command-line arguments
// (without the program name) and, for the flags those do not set, from
// the environment that lookup reads (os.LookupEnv in cmd/main.go).
func ParseArgs(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) (*Options, error) {
	opts := NewOptions()
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := ApplyEnv(fs, lookup); err != nil {
		return nil, err
	}
	return opts, nil
}
