package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/fs"
	"github.com/dlgate/dlgate/storage/s3"
)

// loadConfig loads the configuration of the commands that work on the
// gateway's own database and store (serve, migrate, objects digest): serve's
// flags in args, the environment and a --config file. With -h it prints
// usage and the flags and returns errHelped.
func (m *Main) loadConfig(args []string, usage string) (*config.Config, error) {
	cfg, err := config.Load(args, m.Env)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(m.Stdout, usage)
		config.PrintFlags(m.Stdout)
		return nil, errHelped
	}
	return cfg, err
}

// Run loads the configuration from args and the environment and migrates.
func (c *migrateCommand) Run(ctx context.Context, args []string) error {
	cfg, err := c.main.loadConfig(args, "Usage: gateway migrate [flags]\n\nApplies pending database migrations and exits. It takes the flags of 'gateway serve';\nonly the database settings matter:\n")
	if err != nil {
		return err
	}
	return migrate(ctx, cfg)
}

// openLedger opens cfg's database and, unless skip, applies migrations.
func openLedger(ctx context.Context, cfg *config.Config, skip bool) (*sqlcore.DB, error) {
	switch cfg.DBDriver {
	case "mysql":
		db, err := mysql.Open(ctx, cfg.DBDSN)
		if err != nil {
			return nil, err
		}
		if !skip {
			if err := mysql.Migrate(ctx, db.SQL()); err != nil {
				db.Close()
				return nil, err
			}
		}
		return db, nil
	default:
		db, err := sqlite.Open(ctx, cfg.DBDSN)
		if err != nil {
			return nil, err
		}
		if !skip {
			if err := sqlite.Migrate(ctx, db.SQL(), cfg.DBDSN); err != nil {
				db.Close()
				return nil, err
			}
		}
		return db, nil
	}
}

func openStore(ctx context.Context, cfg *config.Config) (storage.Store, error) {
	if cfg.Store == "s3" {
		return s3.New(ctx, s3.Options{Bucket: cfg.S3Bucket, Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, PathStyle: cfg.S3PathStyle, CAFile: cfg.S3CA})
	}
	return fs.New(cfg.FSRoot)
}

// migrate applies pending migrations to cfg's database.
func migrate(ctx context.Context, cfg *config.Config) error {
	db, err := openLedger(ctx, cfg, false)
	if err != nil {
		return err
	}
	return db.Close()
}
